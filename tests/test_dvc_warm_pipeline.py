"""The paper's pipeline (every design of dvc.yaml, at three items) under a real plain `dvc repro`,
warm (stages/dvc_warm.py) and cold (JUDGELOOP_WARM=0): the same outputs, recordings and dvc.lock,
byte for byte, and every `python -m stages` after the first one really ran warm."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import yaml

from stages import dvc_warm
from tests.test_pipeline_dvc import _dvc
from tests.test_pipeline_dvc import project as project  # the fixture: a temporary git repo

pytestmark = pytest.mark.slow
# How long the warm process may take to see DVC gone and end: a bound for a loaded machine (a CI
# runner shares its cores), not a timing; on a quiet one it ends within milliseconds.
ENDED_WITHIN = 30


def _tree(root: Path) -> dict[str, bytes]:
    files = [p for name in ("outputs", "recordings", "stages/code") for p in (root / name).rglob("*")]
    return {str(p.relative_to(root)): p.read_bytes() for p in [*files, root / "dvc.lock"] if p.is_file()}


def _stage_commands(root: Path) -> list[str]:
    stages = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]
    return [spec["cmd"].removeprefix("python -m stages ") for spec in stages.values()]


def _warm_log(log: Path, run: Path, commands: list[str]) -> None:
    """Every `python -m stages` after the first ran warm, and the warm process had ended (its socket
    removed) soon after DVC's return."""
    lines = log.read_text().splitlines()
    ran = [line for line in lines if not line.startswith("warm process ")]
    assert ran == [f"cold starting the warm process: {commands[0]}"] + [f"warm {c}" for c in commands[1:]]
    pid = int(next(line for line in lines if line.endswith(" ready")).split()[2])
    deadline = time.monotonic() + ENDED_WITHIN
    while time.monotonic() < deadline and _running(pid):
        time.sleep(0.02)
    assert not _running(pid)
    assert not list((run / f"judgeloop-warm-{os.getuid()}").iterdir())
    log.unlink()


def _running(pid: int) -> bool:
    try:
        return b") Z " not in Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False


def test_warm_and_cold_repros_write_the_same_bytes(
    project: Path, tmp_path: Path, short_tmp_path: Path
) -> None:
    """A live run warm; then replayed cold and warm (`--force`, every stage again): each leaves
    every output, recording, code digest and dvc.lock as the live run left them, byte for byte (a
    live run's own clocks, `answered ...Z`, make two live runs differ)."""
    run = short_tmp_path / "run"  # the sockets' paths within AF_UNIX's 107 bytes (tests/conftest.py)
    run.mkdir(mode=0o700)
    log = tmp_path / "warm.log"
    env = {"XDG_RUNTIME_DIR": str(run), dvc_warm.LOG: str(log)}
    commands = [
        c for c in _stage_commands(project) if not c.startswith("python -m ")
    ]  # `python -m stages X Y`
    _dvc(project, "repro", **env)
    _warm_log(log, run, commands)
    live = _tree(project)
    _dvc(project, "repro", "--force", JUDGELOOP_CACHE_MODE="replay", **env, **{dvc_warm.SWITCH: "0"})
    assert not log.exists()
    assert _tree(project) == live
    _dvc(project, "repro", "--force", JUDGELOOP_CACHE_MODE="replay", **env)
    _warm_log(log, run, commands)
    assert _tree(project) == live
