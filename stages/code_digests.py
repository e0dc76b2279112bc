"""python -m stages.code_digests: dvc.yaml's `code` stage, each stage's code digest
(pipeline/tools/code_digests.py). It hashes files and loads no pipeline code but that module."""

import sys
import time
from pathlib import Path

from stages import outside_the_environment

try:
    from pipeline.errors import JudgeloopError
    from pipeline.tools.code_digests import STAGE, write_digests
except ModuleNotFoundError as missing:
    outside_the_environment(missing)


def main() -> int:
    print(f"{STAGE}: starting (it calls no model)", file=sys.stderr)
    started = time.monotonic()
    try:
        write_digests(Path.cwd())
    except JudgeloopError as exc:
        print(f"{STAGE}: {exc.message}", file=sys.stderr)
        return 1
    print(f"{STAGE}: done in {time.monotonic() - started:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
