"""Cost of `judgeloop exp -S`'s check of the user's own -S (pipeline.tools.set_values) on the
committed params.yaml, in CPU seconds (wall in brackets): DVC's own -S path and judgeloop's params
model first (what `exp` pays anyway), then the check's first call, a second call, and a sweep of 3.

    .venv/bin/python bench/set_values_cost.py      (from the project's root; it writes only a copy
                                                    of params.yaml in the system temp folder)
"""

from __future__ import annotations

import resource
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


def _cost(step: Callable[[], object]) -> str:
    used = resource.getrusage(resource.RUSAGE_SELF)
    cpu, wall = used.ru_utime + used.ru_stime, time.perf_counter()
    step()
    used = resource.getrusage(resource.RUSAGE_SELF)
    return f"{used.ru_utime + used.ru_stime - cpu:.3f} ({time.perf_counter() - wall:.2f})"


def _paid_anyway() -> None:
    from dvc.utils.hydra import apply_overrides

    from pipeline.experiments.params import params_model

    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / "params.yaml"
        shutil.copy("params.yaml", copy)
        apply_overrides(str(copy), ["refine.threshold=2"])
    params_model()


def main() -> None:
    from pipeline.tools.set_values import check_set_values

    params = Path("params.yaml")
    costs = [
        _cost(_paid_anyway),
        _cost(lambda: check_set_values(["refine.threshold=2"], params=params)),
        _cost(lambda: check_set_values(["refine.threshold=2"], params=params)),
        _cost(lambda: check_set_values(["refine.threshold=1,2,3"], params=params)),
    ]
    print("| DVC's -S and the model | first check | second | sweep of 3 |")
    print("| " + " | ".join(costs) + " |")


if __name__ == "__main__":
    main()
