"""`judgeloop repro`'s DVC (pipeline.tools.dvc_run, in this process) refuses the run-cache look-up of
a stage with persist outputs before hashing its dependencies (pipeline.tools.dvc_run_cache), and
otherwise runs it as DVC does: the same dvc.lock, no run-cache entry either way. A real DVC run in a
temporary git repository, twice: through judgeloop's runner and through DVC's own main."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import pytest
from dvc.dependency import Dependency
from dvc.output import Output
from dvc.stage.cache import StageCache

from pipeline.tools import dvc_run

DEPS = 6


def a_project(root: Path) -> Path:
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=root, check=True)
    (root / "src").mkdir()
    for i in range(DEPS):
        (root / "src" / f"f{i}.txt").write_text(f"{i}\n")
    deps = "".join(f"      - src/f{i}.txt\n" for i in range(DEPS))
    (root / "dvc.yaml").write_text(
        "stages:\n  s:\n    cmd: cat src/f0.txt src/f1.txt > out.txt\n    deps:\n"
        + deps
        + "    outs:\n      - out.txt:\n          cache: false\n          persist: true\n"
    )
    return root


@contextmanager
def hashes_in_look_ups(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The dependencies hashed inside DVC's run-cache look-ups (StageCache.restore)."""
    hashed: list[str] = []
    inside: list[bool] = []
    get_hash, restore = Output.get_hash, StageCache.restore

    def counted_get_hash(self: Output) -> Any:
        if inside and isinstance(self, Dependency):
            hashed.append(str(self))
        return get_hash(self)

    def marked_restore(self: StageCache, *args: Any, **kwargs: Any) -> Any:
        inside.append(True)
        try:
            return restore(self, *args, **kwargs)
        finally:
            inside.pop()

    monkeypatch.setattr(Output, "get_hash", counted_get_hash)
    monkeypatch.setattr(StageCache, "restore", marked_restore)
    yield hashed


@pytest.mark.parametrize("through_judgeloop", [True, False])
def test_a_persist_stage_is_looked_up_without_hashing_its_dependencies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, through_judgeloop: bool
) -> None:
    root = a_project(tmp_path / "project")
    monkeypatch.chdir(root)
    statuses, look_ups = [], []
    for change in ("first", "second"):  # the second run: a dependency changed since the lock
        (root / "src" / "f1.txt").write_text(f"{change}\n")
        runner = dvc_run._dvc_in_process() if through_judgeloop else nullcontext()
        with hashes_in_look_ups(monkeypatch) as hashed, runner:
            statuses.append(dvc_run._dvc_main(["repro", "--quiet"]))
        look_ups.append(len(hashed))
    assert statuses == [0, 0]
    assert (root / "out.txt").read_text() == "0\nsecond\n"
    assert not (root / ".dvc" / "cache" / "runs").exists()  # DVC saves no run-cache entry either way
    assert look_ups == ([0, 0] if through_judgeloop else [DEPS, DEPS])
    lock = (root / "dvc.lock").read_text()
    assert lock.count("md5:") == DEPS + 1  # every dependency hashed into the lock, and the out


def test_the_lock_is_the_one_dvc_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    locks = []
    for through_judgeloop in (True, False):
        root = a_project(tmp_path / f"project-{through_judgeloop}")
        monkeypatch.chdir(root)
        with dvc_run._dvc_in_process() if through_judgeloop else nullcontext():
            assert dvc_run._dvc_main(["repro", "--quiet"]) == 0
        locks.append((root / "dvc.lock").read_text())
    assert locks[0] == locks[1]
