"""Where DVC calls in: every stage of dvc.yaml is `python -m stages DESIGN STAGE` (runner.py), and
the last, the report index over every design, `python -m stages.index`.

DVC runs them with the `python` it finds first on the PATH. In a fresh shell that is the system's,
which lacks judgeloop's dependencies: `outside_the_environment` says so and how to run the stage
instead of a traceback. DVC keeps every out of a stage (persist, dvc.yaml), so a stage that stops
there leaves them as they were. Only the standard library may be imported here.
"""

from __future__ import annotations

import sys
from typing import NoReturn


def outside_the_environment(missing: ModuleNotFoundError) -> NoReturn:
    if missing.name is None or missing.name.partition(".")[0] in ("stages", "pipeline"):
        raise missing
    sys.exit(
        f"judgeloop: this Python ({sys.executable}) lacks {missing.name!r}, one of judgeloop's "
        "dependencies: it is not judgeloop's environment. The stage did not run; its outputs are "
        "as they were.\nFix: run it through make (`make repro`) or `./judgeloop repro`, which put "
        "the environment first on the PATH, or activate it first (`. .venv/bin/activate`)."
    )
