"""Fuzzing dvc.lock as `judgeloop check` reads it and then hashes what it names
(pipeline.tools.check: read_lock, then differences, md5_of each out under the folder checked).
test_fuzz_tools fuzzes read_lock alone; what it returns was never hashed. The property of
tests/fuzz/support.py, and: every out it hashes lies inside the folder checked."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import click
import pytest
from hypothesis import given

from pipeline.tools.check import differences, read_lock
from tests.fuzz.support import clear_or_correct, committed, edited_or_swapped, fuzz

LOCK = committed("dvc.lock")
ODD_OUTS = [
    b"../outside.txt",
    b"/etc/hostname",
    b'"outputs/a\\0b"',
    b"outputs/../../outside.txt",
    b'""',
    b".",
]


@fuzz
@given(data=edited_or_swapped(LOCK, b"outputs/paper/metrics.json", ODD_OUTS, lead=b"path: "))
def test_dvc_lock_as_check_hashes_its_outs(sandbox: Path, data: bytes) -> None:
    (sandbox / "dvc.lock").write_bytes(data)
    locked = clear_or_correct(lambda: read_lock(sandbox))
    if isinstance(locked, click.ClickException):
        return
    for stage in locked.values():
        for out in stage.outs:
            assert (sandbox / out.path).resolve().is_relative_to(sandbox.resolve()), out.path
        clear_or_correct(partial(differences, stage, sandbox, "here"))


@pytest.mark.parametrize("out", ODD_OUTS[:4])
def test_an_out_outside_the_project_is_refused_naming_dvc_lock(sandbox: Path, out: bytes) -> None:
    """Found by the fuzzing: an out's path in dvc.lock was hashed wherever it led (`../x`, an
    absolute path: read outside the project, its md5 printed), and one holding a NUL raised
    ValueError (embedded null byte) from the hash, naming neither file nor fix."""
    (sandbox / "dvc.lock").write_bytes(LOCK.replace(b"path: outputs/paper/metrics.json", b"path: " + out, 1))
    with pytest.raises(
        click.ClickException, match=r"dvc\.lock: stage 'aggregate' names the out .* not a path inside"
    ):
        read_lock(sandbox)
