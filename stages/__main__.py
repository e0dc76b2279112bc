"""python -m stages DESIGN STAGE: run one stage of one judge design (stages/runner.py)."""

import os
import sys

from stages import outside_the_environment

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
        # after a stage of the paper's scale, bench/scale.py), as mypy does. A failure exits as usual.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
