"""A stage's staged dry-run results (stages/runner.py StagedResults): a file of its own per staging,
locked while its stage holds it, and a killed stage's removed by the next write into that folder as
pipeline.llm.killed_writes removes a killed write's."""

from __future__ import annotations

import fcntl
import os
import stat
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pipeline.experiments.steps import Output
from pipeline.llm.files import atomic_write_chunks
from stages.runner import StagedResults
from tests.conftest import ROOT


def _write(path: Path, rows: Iterable[str]) -> None:
    atomic_write_chunks(path, (row + "\n" for row in rows))


def _step(write: Any = _write) -> Any:
    return SimpleNamespace(output=Output(lambda row: row, lambda row: row, write), done=None)


def _sweep_elsewhere(folder: Path) -> None:
    """The sweep of another process's first write into `folder` (this one has swept it already)."""
    code = "import sys, pathlib; from pipeline.llm.killed_writes import sweep_killed_writers as s; "
    code += "s(pathlib.Path(sys.argv[1]))"
    subprocess.run([sys.executable, "-c", code, str(folder)], cwd=ROOT, check=True)


def test_two_stagings_of_one_target_each_have_a_file_of_their_own(tmp_path: Path) -> None:
    """Two stages staging one target at once (two runs of one project, a stage run by hand beside
    DVC's): neither publishes nor removes the other's results."""
    target = tmp_path / "outputs" / "results.jsonl"
    first, second = StagedResults(_step(), target), StagedResults(_step(), target)
    assert first.path != second.path
    first.write(["first"])
    second.write(["second"])
    first.discard()
    assert second.intact
    second.publish()
    assert target.read_text() == "second\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["results.jsonl"]


def test_a_held_staged_file_is_left_by_a_sweep_and_a_killed_one_s_is_removed(tmp_path: Path) -> None:
    folder = tmp_path / "outputs"
    target = folder / "results.jsonl"
    held = StagedResults(_step(), target)
    held.write(["held"])
    assert held.path.name.startswith(".results.jsonl.dry-run.") and held.path.name.endswith(".locked.tmp")
    _sweep_elsewhere(folder)  # another process writing there: the file is this stage's, locked
    assert held.path.exists() and held.intact
    held.publish()
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~_umask()  # as a plain write leaves it
    # A stage killed while it held its staged file, and an older judgeloop's killed one (one fixed
    # name): the next stage staging there removes both.
    killed = folder / ".results.jsonl.dry-run.abcd1234.locked.tmp"
    older = folder / ".results.jsonl.dry-run.tmp"
    for leftover in (killed, older):
        leftover.write_text("half\n")
    code = (
        "import sys; from pathlib import Path; from tests.test_staged_results import _step; "
        "from stages.runner import StagedResults; StagedResults(_step(), Path(sys.argv[1])).discard()"
    )
    subprocess.run([sys.executable, "-c", code, str(target)], cwd=ROOT, check=True)
    assert sorted(p.name for p in folder.iterdir()) == ["results.jsonl"]


def test_an_older_name_someone_holds_is_left(tmp_path: Path) -> None:
    """A file of the older fixed name that someone holds locked is left: only an unlocked one is taken
    (killed_writes' rule), as a killed stage leaves it."""
    target = tmp_path / "results.jsonl"
    older = tmp_path / ".results.jsonl.dry-run.tmp"
    older.write_text("live\n")
    with open(older, "rb") as live:
        fcntl.flock(live, fcntl.LOCK_EX)
        StagedResults(_step(), target).discard()
        assert older.read_text() == "live\n"


def test_a_staged_file_a_sweep_took_is_not_adopted(tmp_path: Path) -> None:
    """Taken in the instant between the Output's rename and the lock taken again: not intact, so the
    stage runs its step rather than publish nothing (stages.runner.step_results)."""

    def write_then_taken(path: Path, rows: Iterable[str]) -> None:
        _write(path, rows)
        path.unlink()  # what a sweep in another process did, in that instant

    staged = StagedResults(_step(write_then_taken), tmp_path / "results.jsonl")
    staged.write(["row"])
    assert not staged.intact
    staged.discard()
    assert list(tmp_path.iterdir()) == []


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
