"""Hard links in folders judgeloop writes in place (pipeline.llm.hard_links): a name inside the
folder for a file elsewhere. Outputs replaced by a rename are safe; the cache's SQLite database (and
its -wal and -shm files) and a recording writer's journal are written where they stand, so a file
there with another name is refused before anything is written, and the other file is unchanged."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from pipeline.errors import JudgeloopError, UnsafeNameError
from pipeline.llm.cache.safe_disk import DB_FILE, open_cache
from pipeline.llm.recordings.shards import JOURNAL, write_shard
from pipeline.tools.variant import _copy

OTHER = b"someone else's file\n"


def _other(tmp_path: Path, content: bytes = OTHER) -> Path:
    other = tmp_path / "elsewhere"
    other.write_bytes(content)
    return other


@pytest.mark.parametrize("name", [DB_FILE, f"{DB_FILE}-wal", f"{DB_FILE}-shm"])
def test_a_cache_database_file_with_another_name_is_refused_unwritten(tmp_path: Path, name: str) -> None:
    folder = tmp_path / "cache"
    folder.mkdir()
    other = _other(tmp_path, b"" if name == DB_FILE else OTHER)  # empty: SQLite would make its tables there
    os.link(other, folder / name)
    before = other.read_bytes()
    with pytest.raises(UnsafeNameError, match="hard link"):
        cache = open_cache(folder)
        cache.set("k" * 32, b"value")
        cache.close()
    assert other.read_bytes() == before


def test_a_writer_journal_with_another_name_is_refused_unwritten(tmp_path: Path) -> None:
    folder = tmp_path / "recordings" / "judge"
    folder.mkdir(parents=True)
    other = _other(tmp_path)
    os.link(other, folder / JOURNAL)
    with pytest.raises(UnsafeNameError, match="hard link"):
        write_shard(folder, "calls", "0", [b"{}\n"])
    assert other.read_bytes() == OTHER
    assert [p.name for p in folder.iterdir()] == [JOURNAL]  # no shard, no temporary file left


@pytest.mark.parametrize("link", ["hard", "symbolic"])
def test_variant_copies_replace_a_link_at_the_target_s_name(tmp_path: Path, link: str) -> None:
    """`judgeloop variant DIR` into a DIR someone else committed: an output copied there replaces a
    link at its name rather than writing the file it leads to."""
    source = tmp_path / "workspace" / "judgements.jsonl"
    source.parent.mkdir()
    source.write_text('{"item": "1"}\n', encoding="utf-8")
    other = _other(tmp_path)
    target = tmp_path / "variant" / "judgements.jsonl"
    target.parent.mkdir()
    os.link(other, target) if link == "hard" else target.symlink_to(other)
    folder = tmp_path / "workspace" / "recordings"
    folder.mkdir()
    (folder / "calls.jsonl").write_text("{}\n", encoding="utf-8")
    linked = tmp_path / "variant" / "recordings"
    linked.mkdir()
    os.link(other, linked / "calls.jsonl") if link == "hard" else (linked / "calls.jsonl").symlink_to(other)
    _copy(source, target)
    _copy(folder, linked)
    assert other.read_bytes() == OTHER
    assert target.read_bytes() == source.read_bytes() and not target.is_symlink()
    assert (linked / "calls.jsonl").read_bytes() == b"{}\n"


def test_variant_refuses_to_copy_an_output_onto_itself(tmp_path: Path) -> None:
    """An absolute out path gives FOLDER / out == out: replacing the target would remove the source."""
    source = tmp_path / "judgements.jsonl"
    source.write_text('{"item": "1"}\n', encoding="utf-8")
    with pytest.raises(JudgeloopError, match="copying would replace what it copies"):
        _copy(source, tmp_path / "variant" / source)
    assert source.read_text(encoding="utf-8") == '{"item": "1"}\n'


def test_the_fix_named_for_a_database_with_another_name_keeps_the_calls_it_holds(tmp_path: Path) -> None:
    """A project copied with `cp -al` (or a tool that links files of equal bytes) gives the cache's
    database a second name. The fix the refusal names must keep what the database holds: a live run's
    finished calls are only there until its recording is written, and a -wal file left by a stopped
    run holds rows not yet in cache.db; removing either repeats those calls (review6)."""
    folder = tmp_path / "cache"
    folder.mkdir()
    cache = open_cache(folder)
    cache.set("k" * 32, b"a finished call")
    cache.close()
    os.link(folder / DB_FILE, tmp_path / "backup.db")
    with pytest.raises(UnsafeNameError, match="hard link") as raised:
        open_cache(folder)
    fix = re.search(r"Fix: [^(]*\(([^)]*)\)", raised.value.message)
    assert fix is not None, raised.value.message
    subprocess.run(fix.group(1), shell=True, check=True)
    cache = open_cache(folder)
    assert cache.get("k" * 32) == b"a finished call"
    cache.close()
    assert os.stat(folder / DB_FILE).st_nlink == 1 and os.stat(tmp_path / "backup.db").st_nlink == 1
