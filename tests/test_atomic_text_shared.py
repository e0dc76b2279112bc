"""AtomicText (a file written through a text handle, the plot tables' CSV) and atomic_write_chunks
replace a file the one same way (pipeline.llm.files._Replacement): the same bytes and mode, the old
file kept and no temporary file left however the write fails.

Before, AtomicText had a copy of its own, which on a commit whose flush failed (a full disk, a file
size limit) tried the same flush again while discarding: that raised, so its temporary file was left
beside the target for good."""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pipeline.llm.files import AtomicText, atomic_write_chunks

TEXT = "series,item\n" + "".join(f"a {n},{n}\n" for n in range(2000))  # some 20 kB


def _through_text(path: Path) -> None:
    with AtomicText(path) as handle:
        for line in TEXT.splitlines(keepends=True):
            handle.write(line)


def _through_chunks(path: Path) -> None:
    atomic_write_chunks(path, TEXT.splitlines(keepends=True))


WRITERS: dict[str, Callable[[Path], None]] = {
    "AtomicText": _through_text,
    "atomic_write_chunks": _through_chunks,
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_both_write_the_same_bytes_with_a_plain_write_s_mode(tmp_path: Path, writer: str) -> None:
    path = tmp_path / "scores.csv"
    plain = tmp_path / "plain.csv"
    plain.write_text(TEXT, encoding="utf-8", newline="")
    WRITERS[writer](path)
    assert path.read_bytes() == TEXT.encode("utf-8")
    assert (path.stat().st_mode & 0o777) == (plain.stat().st_mode & 0o777)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain.csv", "scores.csv"]


@contextlib.contextmanager
def _files_no_larger_than(limit: int) -> Iterator[None]:
    """A write past `limit` bytes fails (EFBIG), as on a full disk, for the block only."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    old = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the error, not the signal's end of the process
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old)


@pytest.mark.skipif(not hasattr(signal, "SIGXFSZ"), reason="a file size limit is POSIX's")
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_write_that_fails_keeps_the_old_file_and_leaves_no_temporary_file(
    tmp_path: Path, writer: str
) -> None:
    path = tmp_path / "scores.csv"
    path.write_text("old\n", encoding="utf-8")
    with _files_no_larger_than(4096), pytest.raises(OSError) as failed:
        WRITERS[writer](path)
    assert failed.value.errno == errno.EFBIG
    assert path.read_text(encoding="utf-8") == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores.csv"]  # nothing left beside it


def test_a_commit_after_a_commit_and_a_discard_after_it_change_nothing(tmp_path: Path) -> None:
    path = tmp_path / "scores.csv"
    table = AtomicText(path)
    table.handle.write(TEXT)
    table.commit()
    table.commit()
    table.discard()
    assert path.read_bytes() == TEXT.encode("utf-8")
    assert os.listdir(tmp_path) == ["scores.csv"]
