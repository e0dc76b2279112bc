"""A stage's code digest names every module of the project that the stage loads when it RUNS, not
only those a fresh interpreter loads to import it (pipeline.tools.dvc_yaml): a module imported
inside a function (stages.runner imports the dry run's probe when an LLM stage runs) changes what
the stage writes as much as one imported at the top, so a change to it must rerun the stage.

Each stage of dvc.yaml is run as DVC runs it (`python -m stages ...`), replayed from the committed
recordings in a copy of the project, with Python's own import log (-X importtime: every import,
wherever it happens, even in a process that leaves by os._exit)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline.tools.code_digests import read_imports
from tests.conftest import ROOT
from tests.test_check import project  # noqa: F401 (a fixture: a copy of the committed project)

IMPORTED = re.compile(r"import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$")
ENGINE = "pipeline/llm/"  # an LLM stage depends on this folder whole (dvc.yaml)


def _project_file(module: str) -> str | None:
    """The file of the project's own module `module`, relative to the project; None for any other."""
    path = Path(*module.split("."))
    for candidate in (path / "__init__.py", path.with_suffix(".py")):
        if (ROOT / candidate).is_file():
            return candidate.as_posix()
    return None


def _loaded(command: str, folder: Path) -> set[str]:
    """The project's module files that `command` (a stage's cmd) imports, running to its end."""
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "PYTHONPROFILEIMPORTTIME": "1",
        "JUDGELOOP_CACHE_MODE": "replay",
        "JUDGELOOP_CACHE_DIR": str(folder / "cache"),
    }
    done = subprocess.run(command.split(), cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{command}:\n{done.stderr[-4000:]}"
    modules = {m.group(1) for line in done.stderr.splitlines() if (m := IMPORTED.match(line))}
    return {f for module in modules if (f := _project_file(module))}


@pytest.mark.slow
def test_every_module_a_stage_loads_when_it_runs_is_in_its_code_digest(project: Path) -> None:  # noqa: F811
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    imports = read_imports(ROOT)
    unlisted = {}
    for stage, spec in stages.items():
        if stage == "code":
            continue
        engine = ENGINE.rstrip("/") in spec["deps"]
        loaded = _loaded(spec["cmd"], project)
        assert "stages/runner.py" in loaded or stage == "report_index", (stage, sorted(loaded))
        missing = sorted(f for f in loaded - set(imports[stage]) if not (engine and f.startswith(ENGINE)))
        if missing:
            unlisted[stage] = missing
    assert not unlisted, f"loaded when the stage runs, but not in its code digest: {unlisted}"
