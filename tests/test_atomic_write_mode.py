"""The mode of a file written in one step (pipeline.llm.files.atomic_write, AtomicText): as a plain
write gives it. The aggregate outputs, the report's index and figures and dvc.yaml were written with
`write_text` before they went through a temporary file: a new file then took its mode from the umask
(0600 under umask 077: a private checkout stays private; 0664 under 002: a group's shared checkout
stays writable by the group), and an existing file kept its own. A fixed 0644 broke both."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pipeline.data.jsonl import Result, write_jsonl
from pipeline.experiments.params import load_params
from pipeline.llm.files import AtomicText, atomic_write, replacing
from pipeline.tools.batch.exchange import export
from pipeline.tools.batch.manifest import MANIFEST_FILE, REQUESTS_FILE
from tests.test_batch import exported  # noqa: F401  (the fixture: an export of two calls)


@contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def write_atomic(path: Path, text: str) -> None:
    atomic_write(path, text)


def write_text_handle(path: Path, text: str) -> None:
    with AtomicText(path) as handle:
        handle.write(text)


class Line(Result):
    item: str
    text: str


def write_results(path: Path, text: str) -> None:
    """A stage's results file (pipeline.data.jsonl.write_jsonl), written aside in item order and
    renamed in: before, it kept the mode mkstemp gave the file aside (0600, whatever the umask or the
    old file's mode), so every stage's output lost the group's or others' read."""
    write_jsonl(path, [Line(item="a", text=text)])


def write_batch_file(path: Path, text: str) -> None:
    """A batch round's requests, manifest and results files (files.replacing, which the batch code
    uses): before, batch.manifest had its own copy of the replace logic, with a fixed 0644."""
    with replacing(path) as out:
        out.write(text.encode("utf-8"))


Writer = Callable[[Path, str], None]
WRITERS: list[Writer] = [write_atomic, write_text_handle, write_results, write_batch_file]


def written(write: Writer, text: str) -> str:
    """What `write` leaves in the file for `text`."""
    return f'{{"item":"a","text":"{text}"}}\n' if write is write_results else text


@pytest.mark.parametrize("write", WRITERS)
@pytest.mark.parametrize("mask", [0o077, 0o022, 0o002])
def test_a_new_file_takes_its_mode_from_the_umask(tmp_path: Path, write: Writer, mask: int) -> None:
    with umask(mask):
        (tmp_path / "plain.md").write_text("x")
        write(tmp_path / "atomic.md", "x")
    assert mode(tmp_path / "atomic.md") == mode(tmp_path / "plain.md") == 0o666 & ~mask


@pytest.mark.parametrize("write", WRITERS)
@pytest.mark.parametrize("old", [0o600, 0o640, 0o664])
def test_an_existing_file_keeps_its_mode(tmp_path: Path, write: Writer, old: int) -> None:
    target = tmp_path / "metrics.json"
    target.write_text("old")
    target.chmod(old)
    with umask(0o022):
        write(target, "new")
    assert target.read_text() == written(write, "new")
    assert mode(target) == old


@pytest.mark.parametrize("write", WRITERS)
def test_a_link_at_the_name_lends_it_no_mode(tmp_path: Path, write: Writer) -> None:
    outside = tmp_path / "outside"
    outside.write_text("theirs")
    outside.chmod(0o600)
    target = tmp_path / "report.md"
    target.symlink_to(outside)
    with umask(0o022):
        write(target, "ours")
    assert not target.is_symlink() and target.read_text() == written(write, "ours")
    assert mode(target) == 0o644
    assert outside.read_text() == "theirs"


@pytest.mark.parametrize("old", [0o600, 0o640])
def test_a_batch_export_keeps_its_files_modes(exported: Path, old: int) -> None:  # noqa: F811
    """The export's requests and manifest, written again over files of another mode: each keeps
    its own (they were 0644 whatever stood there)."""
    for name in (REQUESTS_FILE, MANIFEST_FILE):
        (exported / name).chmod(old)
    with umask(0o022):
        export(load_params(), exported)
    assert {mode(exported / name) for name in (REQUESTS_FILE, MANIFEST_FILE)} == {old}
