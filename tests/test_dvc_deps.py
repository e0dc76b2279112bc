"""dvc.yaml names every library module a stage runs: otherwise a code change that alters a stage's
outputs would leave DVC saying the stage is up to date, and a rerun would not reproduce it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline.tools import code_digests
from tests.conftest import ROOT

STAGES = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
# A stage's module files are in imports.json; it depends on its digest of them (the code stage).
IMPORTS = json.loads((ROOT / code_digests.IMPORTS).read_text())["stages"]


INDEX_STAGE = "report_index"  # `python -m stages.index`: the report index over every design
LOAD = {
    "stage": "import stages.__main__; from stages.runner import load; load(sys.argv[1], sys.argv[2])",
    "index": "import stages.index; from pipeline.tools.report_index import load_all; load_all()",
}


def _imported_library_files(design: str, stage: str) -> set[str]:
    """The pipeline/ and stages/ files a fresh interpreter loads to run the stage, as
    `python -m stages DESIGN STAGE` (or `python -m stages.index`) does before it runs it."""
    code = (
        f"import json, sys; {LOAD['index' if stage == INDEX_STAGE else 'stage']}; "
        "print(json.dumps(sorted({m.__file__ for n, m in list(sys.modules.items()) "
        "if n.split('.')[0] in ('pipeline', 'stages') and getattr(m, '__file__', None)})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, design, stage], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return {str(Path(f).relative_to(ROOT)) for f in json.loads(out.stdout)}


@pytest.mark.parametrize("stage", sorted(set(STAGES) - {code_digests.STAGE}))
def test_every_module_a_stage_runs_is_a_dependency(stage: str) -> None:
    spec = STAGES[stage]
    if stage == INDEX_STAGE:
        assert spec["cmd"] == "python -m stages.index"
        design, name = "", stage
    else:
        design, name = spec["cmd"].removeprefix("python -m stages ").split()
    assert name == stage  # recordings/<stage>/ and the runs' statistics are keyed by the stage's name
    assert code_digests.digest_path(stage) in spec["deps"]
    code = STAGES[code_digests.STAGE]
    assert code_digests.digest_path(stage) in {path for out in code["outs"] for path in out}
    unhashed = [f for f in IMPORTS[stage] if not any(f == d or f.startswith(d + "/") for d in code["deps"])]
    assert not unhashed, f"the code stage does not depend on {unhashed}, which {stage}'s digest names"
    deps = [d.rstrip("/") for d in [*spec["deps"], *IMPORTS[stage]]]
    missing = sorted(
        f
        for f in _imported_library_files(design, name)
        if not any(f == d or f.startswith(d + "/") for d in deps)
    )
    assert not missing, f"dvc.yaml: stage '{stage}' runs {missing} but does not list them under deps"
