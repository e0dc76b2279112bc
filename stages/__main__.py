"""python -m stages DESIGN STAGE: run one stage of one judge design (stages/runner.py).

DVC runs this with the `python` it finds first on the PATH. In a fresh shell that is the system's,
which lacks judgeloop's dependencies: say so and how to run the stage instead of a traceback. DVC
keeps every out of a stage (persist, dvc.yaml), so a stage that stops here leaves them as they were.
"""

import sys

try:
    from stages.runner import main
except ModuleNotFoundError as missing:
    if missing.name is None or missing.name.partition(".")[0] in ("stages", "pipeline"):
        raise
    sys.exit(
        f"judgeloop: this Python ({sys.executable}) lacks {missing.name!r}, one of judgeloop's "
        "dependencies: it is not judgeloop's environment. The stage did not run; its outputs are "
        "as they were.\nFix: run it through make (`make repro`, which puts .venv/bin first on the "
        "PATH), or activate the environment first (`. .venv/bin/activate`) and run dvc again."
    )

if __name__ == "__main__":
    main()
