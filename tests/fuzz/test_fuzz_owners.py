"""Fuzzing dvc.yaml as the recordings' pins read it (pipeline.llm.recordings.owners: which stage
owns which recordings folder, so that dvc.lock's pin of a folder counts only under its owner).
test_fuzz_records and test_fuzz_tools fuzz dvc.lock with no dvc.yaml beside it, so the owners were
never asked; here the committed dvc.lock stays and dvc.yaml is edited: odd out paths (a NUL, a path
out of recordings/, a look-alike of a stage's folder), stages named twice. The property of
tests/fuzz/support.py, and: no pin is found for a folder outside recordings/."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given

from pipeline.errors import LockMismatchError
from pipeline.llm.recordings.owners import pipeline_stages, recording_owners
from pipeline.llm.recordings.pins import Pins
from tests.fuzz.support import clear_or_correct, committed, edited_or_swapped, fuzz

PIPELINE = committed("dvc.yaml")
ODD_OUTS = [
    b'"recordings/judge\\0"',
    b'"recordings/JUDGE"',
    b"recordings/../recordings/judge",
    b"../recordings/judge",
    b"/etc",
    b'"recordings/judge\\u200b"',
    b"recordings/",
    b"recordings",
]


@fuzz
@given(data=edited_or_swapped(PIPELINE, b"recordings/judge", ODD_OUTS))
def test_dvc_yaml_as_the_pins_read_it(sandbox: Path, data: bytes) -> None:
    (sandbox / "dvc.yaml").write_bytes(data)
    (sandbox / "dvc.lock").write_bytes(committed("dvc.lock"))
    recordings = sandbox / "recordings"
    (recordings / "judge").mkdir(parents=True, exist_ok=True)
    clear_or_correct(lambda: pipeline_stages(sandbox))
    owners = clear_or_correct(lambda: recording_owners(sandbox, recordings))
    if isinstance(owners, dict):
        assert all(path.parent == recordings.resolve() for path in owners)
    pins = Pins(sandbox, recordings)
    clear_or_correct(lambda: pins.problem(recordings / "judge"))
    clear_or_correct(lambda: pins.pin(recordings / "judge"))


def test_an_out_path_holding_a_nul_is_refused_naming_the_file(sandbox: Path) -> None:
    """Found by the fuzzing: an out path written "recordings/judge\\0" (YAML's escape) reached
    Path.resolve, whose ValueError (embedded null byte) named neither file nor fix."""
    recordings = sandbox / "recordings"
    (recordings / "judge").mkdir(parents=True, exist_ok=True)
    for name, data in [
        ("dvc.yaml", PIPELINE.replace(b"recordings/judge", ODD_OUTS[0], 1)),
        (
            "dvc.lock",
            committed("dvc.lock").replace(b"path: recordings/judge", b'path: "recordings/judge\\0"', 1),
        ),
    ]:
        (sandbox / "dvc.yaml").write_bytes(PIPELINE)
        (sandbox / "dvc.lock").write_bytes(committed("dvc.lock"))
        (sandbox / name).write_bytes(data)
        with pytest.raises(LockMismatchError, match=rf"{name}: names the out .*judge.*embedded null byte"):
            Pins(sandbox, recordings).problem(recordings / "judge")
