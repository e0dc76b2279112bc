"""python -m stages DESIGN STAGE: run one stage of one judge design (stages/runner.py)."""

from pipeline.fast_exit import leave_now  # the standard library only: loads nothing more
from stages import outside_the_environment
from stages.dvc_warm import run_warm  # the standard library only

if __name__ == "__main__":
    run_warm()  # under a plain `dvc repro`, a warm process runs the stage: never returns then

try:
    from stages.runner import main
except ModuleNotFoundError as missing:
    outside_the_environment(missing)

if __name__ == "__main__":
    try:
        main()
    except SystemExit as done:
        if done.code not in (0, None):
            raise
        # The stage succeeded and has written and closed every file: leave without the
        # interpreter's teardown, which frees every object the stage held one by one (60-80 ms
        # after a stage of the paper's scale, bench/scale.py), as mypy does; the threads joined,
        # atexit run, the streams flushed (120 where that fails). A failure exits as usual, and
        # so does a Python without the fast exit's steps.
        leave_now(0)
        raise
