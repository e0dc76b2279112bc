"""Audit of one call or one item in a sharded recording finds its blocks where they lie (issue 33):
no block shard is read whole, what is served is what a whole read serves, and a block found at a
wrong place, swapped or edited in place is refused or read whole instead; a writer killed by
SIGKILL leaves shards that the next reader deletes, saying so."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.errors import CorruptRecordError
from pipeline.llm.recordings import (
    block_places,
    item_reader,
    key_reader,
    line_format,
    shards,
    stage_reader,
    stage_writer,
)
from pipeline.llm.recordings.item_reader import read_items
from pipeline.llm.recordings.stage_index import index_stage
from pipeline.llm.records import RecordedCall
from pipeline.tools.cli import main
from tests.test_recordings_shards import _calls, _shard_files

ROOT = Path(__file__).resolve().parents[1]


def _recorded(tmp_path: Path, n: int = 60) -> tuple[Path, list[RecordedCall]]:
    calls = _calls(n)
    directory = tmp_path / "judge"
    stage_writer.write_stage(directory, calls)
    return directory, calls


def _block_shard(directory: Path, blob: str) -> Path:
    [name] = [n for n in _shard_files(directory) if shards.prefix_of(n) == ("blocks", shards.shard_of(blob))]
    return directory / name


def test_a_key_is_read_with_its_blocks_placed_not_their_shards_whole(
    tmp_path: Path, small_threshold: None, whole_reads: list[str]
) -> None:
    directory, calls = _recorded(tmp_path)
    for wanted in (calls[3], calls[41]):
        whole_reads.clear()
        found = list(key_reader.read_keys(directory, [wanted.record.key]))
        assert [loaded.call for loaded in found] == [wanted]
        assert whole_reads == [found[0].path.name]  # its shard of calls only: no block shard whole
        unverified = list(key_reader.read_keys(directory, [wanted.record.key], verify=False))
        assert [(u.path, u.line, u.call) for u in unverified] == [(f.path, f.line, f.call) for f in found]


@pytest.mark.parametrize("calls", [60, 8])  # in shards, and in one file
def test_an_item_is_read_with_its_blocks_placed_and_as_a_whole_read_reads_it(
    tmp_path: Path,
    small_threshold: None,
    whole_reads: list[str],
    monkeypatch: pytest.MonkeyPatch,
    calls: int,
) -> None:
    directory, _ = _recorded(tmp_path, calls)
    placed = [(c.path, c.line, c.call) for c in read_items(directory, {"901", "903"})]
    assert not [name for name in whole_reads if name.startswith("blocks-")]
    monkeypatch.setattr(item_reader, "_placed_items", lambda directory, wanted: None)  # the old path
    whole = [(c.path, c.line, c.call) for c in read_items(directory, {"901", "903"})]
    assert placed == whole and len(placed) == calls * 2 // 5
    assert {call.context.item for _, _, call in placed} == {"901", "903"}


def test_every_block_is_found_at_its_own_place(tmp_path: Path, small_threshold: None) -> None:
    directory, _ = _recorded(tmp_path, 200)
    for name in _shard_files(directory):
        if not name.startswith("blocks-"):
            continue
        data = (directory / name).read_bytes()
        fd = os.open(directory / name, os.O_RDONLY)
        try:
            offset = 0
            for line in data.split(b"\n")[:-1]:
                blob = line[9:25].decode()
                assert block_places.place_of(fd, len(data), blob) == (offset, line)
                offset += len(line) + 1
            assert block_places.place_of(fd, len(data), "f" * 16) is None
            assert block_places.place_of(fd, len(data), "0" * 16) is None
        finally:
            os.close(fd)


def test_a_block_edited_in_place_is_refused(
    tmp_path: Path, small_threshold: None, whole_reads: list[str]
) -> None:
    directory, calls = _recorded(tmp_path)
    wanted = calls[5]
    blob = line_format.blob_refs(line_format.call_to_line(wanted, {}))[0]
    shard = _block_shard(directory, blob)
    data = shard.read_bytes()
    at = data.index(b'{"blob":"' + blob.encode())
    text_at = data.index(b"Participant", at)
    shard.write_bytes(data[:text_at] + b"Pxrticipant" + data[text_at + 11 :])  # same length, same place
    number = data.count(b"\n", 0, at) + 1
    with pytest.raises(
        CorruptRecordError, match=rf"{shard.name}:{number}: blob {blob} does not hash to its id"
    ):
        list(key_reader.read_keys(directory, [wanted.record.key]))
    # audit reads unverified: the call is shown, and its record fails its checksum (so it is marked)
    [shown] = key_reader.read_keys(directory, [wanted.record.key], verify=False)
    assert shown.call.record.problem() is not None
    assert not [name for name in whole_reads if name.startswith("blocks-")]


def test_swapped_block_lines_are_read_whole_and_refused(tmp_path: Path, small_threshold: None) -> None:
    """A block shard out of order (two lines swapped: each block still hashes to its id, but no
    longer lies where bisecting looks): what is found is still each asked-for block checked by its
    id, and what is not found is read with its shard whole, which its hash in the manifest refuses."""
    directory, calls = _recorded(tmp_path, 200)
    name, lines = max(
        (
            (n, (directory / n).read_bytes().split(b"\n")[:-1])
            for n in _shard_files(directory)
            if n.startswith("blocks-")
        ),
        key=lambda pair: len(pair[1]),
    )
    assert len(lines) >= 3
    lines[0], lines[-1] = lines[-1], lines[0]
    (directory / name).write_bytes(b"\n".join(lines) + b"\n")
    refused = served = 0
    for call in calls:
        refs = set(line_format.blob_refs(line_format.call_to_line(call, {})))
        if not any(shards.prefix_of(name) == ("blocks", shards.shard_of(blob)) for blob in refs):
            continue
        try:
            [found] = key_reader.read_keys(directory, [call.record.key])
        except CorruptRecordError as exc:
            assert f"{name}: does not hash to the sha256 calls.jsonl gives it" in str(exc)
            refused += 1
            continue
        assert found.call == call  # served: every block it holds is the one its id names
        served += 1
    assert refused + served > 0
    # a block line replaced by another (valid) block's line: never served as the block asked for
    fd = os.open(directory / name, os.O_RDONLY)
    try:
        first = lines[-1][9:25].decode()  # now at the end, where bisecting does not look for it
        place = block_places.place_of(fd, (directory / name).stat().st_size, first)
        assert place is None or place[1] == lines[-1]
    finally:
        os.close(fd)


def test_a_shard_gone_falls_back_to_the_whole_read_that_names_it(
    tmp_path: Path, small_threshold: None
) -> None:
    directory, calls = _recorded(tmp_path)
    blob = line_format.blob_refs(line_format.call_to_line(calls[0], {}))[0]
    shard = _block_shard(directory, blob)
    shard.unlink()
    with pytest.raises(CorruptRecordError, match=rf"{shard.name}: named by calls.jsonl but missing"):
        list(key_reader.read_keys(directory, [calls[0].record.key], verify=False))


KILLED_WRITER = """
import os, signal, sys
from pathlib import Path
from pipeline.llm.recordings import shards
from pipeline.llm.recordings import stage_writer
from tests.test_recordings_shards import _calls

shards.SHARD_AT = 8
where = sys.argv[2]
setattr(shards, where, lambda *args: os.kill(os.getpid(), signal.SIGKILL))  # before it, or after the rename
stage_writer.write_stage(Path(sys.argv[1]), _calls(50, salt="-again"))
"""


@pytest.mark.parametrize("killed_at", ["commit", "drop_unnamed"])
def test_a_writer_killed_by_sigkill_leaves_shards_the_next_reader_deletes(
    tmp_path: Path, small_threshold: None, killed_at: str, caplog: pytest.LogCaptureFixture
) -> None:
    directory, _ = _recorded(tmp_path, 40)
    before = _shard_files(directory)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", KILLED_WRITER, str(directory), killed_at], cwd=ROOT, env=env, check=False
    )
    assert done.returncode == -signal.SIGKILL
    after = _shard_files(directory)
    assert set(after) > set(before)  # its shards, beside the old ones
    assert (directory / shards.JOURNAL).is_file()
    expected = _calls(40) if killed_at == "commit" else _calls(50, salt="-again")
    with caplog.at_level(logging.WARNING, logger=shards.__name__):
        index = index_stage(directory)
    left = set(after) - set(_shard_files(directory))
    assert left and all(name in caplog.text for name in left)
    assert "killed before it finished" in caplog.text
    assert sorted(index.at) == sorted(c.record.key for c in expected)
    assert not (directory / shards.JOURNAL).exists()
    assert not [p for p in directory.iterdir() if p.name.startswith(".")]
    assert len(list(stage_reader.read_stage(directory))) == len(expected)  # and no stray is left to refuse


def test_a_look_alike_not_in_a_journal_is_still_refused(tmp_path: Path, small_threshold: None) -> None:
    directory, _ = _recorded(tmp_path, 40)
    name = sorted(_shard_files(directory))[0]
    (directory / "calls-0-0123456789abcdef.jsonl").write_bytes((directory / name).read_bytes())
    (directory / shards.JOURNAL).write_text("calls-1-0123456789abcdef.jsonl\n")  # it lists another
    with pytest.raises(CorruptRecordError, match=r"calls-0-0123456789abcdef\.jsonl: looks like a shard"):
        list(stage_reader.read_stage(directory))
    assert (directory / "calls-0-0123456789abcdef.jsonl").is_file()


def test_the_next_writer_deletes_what_a_killed_writer_left_and_names_it(
    tmp_path: Path, small_threshold: None, caplog: pytest.LogCaptureFixture
) -> None:
    directory, _ = _recorded(tmp_path, 40)
    before = _shard_files(directory)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", KILLED_WRITER, str(directory), "commit"], cwd=ROOT, env=env, check=False
    )
    assert done.returncode == -signal.SIGKILL
    left = set(_shard_files(directory)) - set(before)
    assert left
    with caplog.at_level(logging.WARNING, logger=shards.__name__):
        stage_writer.write_stage(directory, _calls(45, salt="-third"))  # no read first
    assert all(name in caplog.text for name in left)
    assert len(list(stage_reader.read_stage(directory))) == 45
    assert not (directory / shards.JOURNAL).exists()


@pytest.mark.parametrize("fmt", ["text", "jsonl"])
def test_audit_shows_the_same_through_placed_blocks_as_through_a_whole_read(
    tmp_path: Path,
    small_threshold: None,
    monkeypatch: pytest.MonkeyPatch,
    fmt: str,
) -> None:
    directory, calls = _recorded(tmp_path)
    root = str(directory.parent)
    asks = [
        ["--item", "902"],
        ["--item", "902", "--iteration", "1"],
        ["--key", calls[17].record.key],
        ["--key", calls[17].record.key, "--key", calls[44].record.key],
    ]

    def shown() -> list[str]:
        out = []
        for ask in asks:
            result = CliRunner().invoke(main, ["audit", *ask, "--recordings", root, "--format", fmt])
            assert result.exit_code == 0, result.stderr
            out.append(result.stdout)
        return out

    placed = shown()
    monkeypatch.setattr(item_reader, "_placed_items", lambda directory, wanted: None)
    monkeypatch.setattr(block_places, "placed_blocks", lambda *args: False)  # read_keys: shards whole
    assert shown() == placed and all(placed)
