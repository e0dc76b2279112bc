"""A replay that served every call of a sharded recording (past shards.SHARD_AT calls) from that
recording as it was read leaves its folder in place: the manifest, every shard and every table of
items keep their inodes, mtimes and bytes (issue 33, branch shard-keep: pipeline.llm.recordings
.unchanged). Any fault the writer would not write (a call line changed or out of order, a block
shard not canonical, a manifest byte, a table the reader accepts but the writer would not write, a
file swapped or edited since it was read) has the folder written as before."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from pipeline.llm.recordings import item_table, shards, stage_calls, stage_folders, unchanged
from pipeline.llm.recordings.stage_index import index_stage
from pipeline.llm.records import CallRecord, RecordedCall
from tests.test_recording_unchanged import (
    _replayed,
    _written,
    edited_in_place,
    replayed_unless_refused,
    session_replayed,
    with_a_raw_break,
)
from tests.test_recordings import _calls

CALLS = 40  # over 16 shards: some shards hold several lines, some an item's two


@pytest.fixture(autouse=True)
def _sharded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shards, "SHARD_AT", 4)


def _manifest(directory: Path) -> Path:
    return directory / stage_folders.CALLS_FILE


def _stamps(directory: Path) -> dict[str, tuple[int, int, bytes]]:
    return {
        path.name: (path.stat().st_ino, path.stat().st_mtime_ns, path.read_bytes())
        for path in sorted(directory.iterdir())
    }


def _bytes(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


def _aged(directory: Path) -> None:
    """Every file's mtime a second back, so that a file written again shows."""
    for path in directory.iterdir():
        mtime = path.stat().st_mtime_ns - 10**9
        os.utime(path, ns=(mtime, mtime))


def _shard(directory: Path, kind: str, fits: Callable[[list[bytes]], bool] = lambda lines: True) -> str:
    """The first shard of `kind` whose lines `fits`."""
    entries = shards.manifest_entries(_manifest(directory), _manifest(directory).read_text())
    return next(
        name
        for name, _ in entries
        if shards.prefix_of(name)[0] == kind
        and fits((directory / name).read_bytes().splitlines(keepends=True))
    )


def _item(line: bytes) -> str:
    item: str = orjson.loads(line).get("context", {}).get("item", "")
    return item


def _replace(directory: Path, name: str, data: bytes, table: bytes | None = None) -> None:
    """Shard `name` replaced by `data` under the name its bytes give, the manifest naming it (so that
    the reader reads it as the recording); a shard of calls' table made anew by the writer's code for
    its lines (or `table`), so that only the fault planted differs from what the writer writes."""
    kind, prefix = shards.prefix_of(name)
    entries = shards.manifest_entries(_manifest(directory), _manifest(directory).read_text())
    (directory / name).unlink()
    new = (f"{kind}-{prefix}-{hashlib.sha256(data).hexdigest()[:16]}.jsonl", hashlib.sha256(data).hexdigest())
    (directory / new[0]).write_bytes(data)
    entries = [new if entry[0] == name else entry for entry in entries]
    if kind == "calls":
        if table is None:
            scratch = directory.parent / "scratch"
            scratch.mkdir(exist_ok=True)
            lines = [(_item(line), line) for line in data.splitlines(keepends=True)]
            table = (scratch / item_table.write_calls(scratch, prefix, lines)[1][0]).read_bytes()
        old_table = next(entry for entry in entries if entry[0].startswith(f"items-{prefix}-"))
        (directory / old_table[0]).unlink()
        sha = hashlib.sha256(table).hexdigest()
        (directory / f"items-{prefix}-{sha[:16]}.jsonl").write_bytes(table)
        entries = [
            (f"items-{prefix}-{sha[:16]}.jsonl", sha) if entry == old_table else entry for entry in entries
        ]
    _manifest(directory).write_text(shards.manifest_text(entries))


def test_a_replay_of_every_call_as_read_leaves_every_file_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _calls(CALLS)
    directory = _written(tmp_path, calls)
    assert shards.is_manifest(_manifest(directory).read_text())
    fresh = _bytes(_written(tmp_path, calls, "fresh"))
    _aged(directory)
    before = _stamps(directory)

    def packed_anew(*_: object) -> str:
        raise AssertionError("a recorded call packed into a new line")

    monkeypatch.setattr(stage_calls, "call_to_line", packed_anew)
    monkeypatch.setattr(shards, "write_shard", packed_anew)
    _replayed(directory, calls)
    assert _stamps(directory) == before
    assert _bytes(directory) == fresh  # as a write gives it


def test_the_wheres_read_back_past_the_bound_leave_it_in_place_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(unchanged, "WHERES_HELD", 0)  # no Where held beside its kept line: read back
    calls = _calls(CALLS)
    directory = _written(tmp_path, calls)
    _aged(directory)
    before = _stamps(directory)
    _replayed(directory, calls)
    assert _stamps(directory) == before


def _split_table(directory: Path) -> tuple[str, bytes, bytes]:
    """A shard of calls whose table has an item's run split in two (the reader accepts it: the runs
    still tile the shard): the shard, its bytes, that table."""
    name = _shard(directory, "calls", lambda lines: len(lines) >= 2 and _item(lines[0]) == _item(lines[1]))
    data = (directory / name).read_bytes()
    lines = data.splitlines(keepends=True)
    runs = [[lines[0]], [lines[1]]]
    for line in lines[2:]:
        if _item(line) == _item(runs[-1][-1]):
            runs[-1].append(line)
        else:
            runs.append([line])
    opening = {
        "bytes": len(data),
        "items_table": item_table.FORMAT,
        "lines": len(lines),
        "runs": len(runs),
        "sha256": hashlib.sha256(data).hexdigest(),
        "shard": name,
    }
    columns = [
        opening,
        [_item(run[0]) for run in runs],
        [sum(map(len, run)) for run in runs],
        [len(run) for run in runs],
        "".join(hashlib.sha256(b"".join(run)).hexdigest() for run in runs),
    ]
    return (
        name,
        data,
        b"".join(orjson.dumps(column, option=orjson.OPT_SORT_KEYS) + b"\n" for column in columns),
    )


def _call_lines_out_of_order(directory: Path) -> None:
    name = _shard(directory, "calls", lambda lines: len(lines) >= 2)
    lines = (directory / name).read_bytes().splitlines(keepends=True)
    _replace(directory, name, b"".join([lines[1], lines[0], *lines[2:]]))


def _a_call_line_in_another_digit_s_shard(directory: Path) -> None:
    name = _shard(directory, "calls", lambda lines: len(lines) >= 2)
    held = (directory / name).read_bytes()
    other = _shard(directory, "calls", lambda lines: lines[0] not in held)
    moved = (directory / name).read_bytes().splitlines(keepends=True)
    _replace(directory, name, b"".join(moved[1:]))
    _replace(directory, other, (directory / other).read_bytes() + moved[0])


def _a_block_spelled_otherwise(directory: Path) -> None:
    name = _shard(directory, "blocks")
    lines = (directory / name).read_bytes().splitlines(keepends=True)
    at = lines[0].index(b'"text":"') + len(b'"text":"')
    at += next(i for i, c in enumerate(lines[0][at:]) if chr(c).isalpha())
    lines[0] = lines[0][:at] + b"\\u%04x" % lines[0][at] + lines[0][at + 1 :]
    _replace(directory, name, b"".join(lines))


def _a_block_unused(directory: Path) -> None:
    extra = _written(directory.parent, _calls(CALLS + 30)[CALLS:], "other")
    name = _shard(directory, "blocks")
    prefix = shards.prefix_of(name)[1]
    ours = (directory / name).read_bytes().splitlines(keepends=True)
    theirs = [
        line
        for other in extra.glob(f"blocks-{prefix}-*.jsonl")
        for line in other.read_bytes().splitlines(keepends=True)
    ]
    added = sorted({*ours, *theirs})
    assert added != ours, "no block of that digit to add"
    _replace(directory, name, b"".join(added))


def _a_manifest_byte(directory: Path) -> None:
    text = _manifest(directory).read_bytes()
    _manifest(directory).write_bytes(text.replace(b'{"sha256":"', b'{"sha256": "', 1))


def _a_manifest_without_its_last_newline(directory: Path) -> None:
    _manifest(directory).write_bytes(_manifest(directory).read_bytes()[:-1])


def _an_item_s_run_split_in_two_in_its_table(directory: Path) -> None:
    name, data, table = _split_table(directory)
    _replace(directory, name, data, table)
    taken = item_table.tabled_items(directory, {_item(data.splitlines()[0])})
    assert taken is not None  # the reader takes the table


def _no_tables_written_before_them(directory: Path) -> None:
    entries = shards.manifest_entries(_manifest(directory), _manifest(directory).read_text())
    for name, _ in entries:
        if name.startswith(shards.TABLE_KIND):
            (directory / name).unlink()
    _manifest(directory).write_text(
        shards.manifest_text(shards.parse_manifest(_manifest(directory), _manifest(directory).read_text()))
    )


def _names(directory: Path, kind: str) -> list[str]:
    entries = shards.manifest_entries(_manifest(directory), _manifest(directory).read_text())
    return [name for name, _ in entries if shards.prefix_of(name)[0] == kind]


def _first_line_to_the_shard_before(directory: Path, kind: str) -> None:
    """The first line of the first shard of `kind` (after the first) holding two or more lines moved
    to the end of the shard before it."""
    names = _names(directory, kind)
    at = next(
        i for i, name in enumerate(names) if i and len((directory / name).read_bytes().splitlines()) >= 2
    )
    moved = (directory / names[at]).read_bytes().splitlines(keepends=True)
    _replace(directory, names[at], b"".join(moved[1:]))
    _replace(directory, names[at - 1], (directory / names[at - 1]).read_bytes() + moved[0])


def _a_call_line_at_the_end_of_the_shard_before(directory: Path) -> None:
    """The file's order kept (the line still after every line of the shard before, and before every
    line of its own): only its digit tells."""
    _first_line_to_the_shard_before(directory, "calls")


def _a_block_line_in_a_shard_of_calls_as_well(directory: Path) -> None:
    block = (directory / _names(directory, "blocks")[0]).read_bytes().splitlines(keepends=True)[0]
    name = _names(directory, "calls")[0]
    _replace(directory, name, (directory / name).read_bytes() + block)


def _blocks_out_of_order_in_their_shard(directory: Path) -> None:
    name = _shard(directory, "blocks", lambda lines: len(lines) >= 2)
    lines = (directory / name).read_bytes().splitlines(keepends=True)
    _replace(directory, name, b"".join([lines[1], lines[0], *lines[2:]]))


def _a_block_at_the_end_of_the_shard_before(directory: Path) -> None:
    _first_line_to_the_shard_before(directory, "blocks")


def _a_table_changed_under_its_name(directory: Path) -> None:
    """The manifest names the writer's table, whose file now holds a table the reader would take
    (an item's run split in two): only the table's bytes tell (the scan reads no table)."""
    name, _, table = _split_table(directory)
    prefix = shards.prefix_of(name)[1]
    written = next(directory.glob(f"items-{prefix}-*.jsonl"))
    written.write_bytes(table)


FAULTS: dict[str, Callable[[Path], None]] = {
    "a call line at the end of the shard before": _a_call_line_at_the_end_of_the_shard_before,
    "a block line in a shard of calls as well": _a_block_line_in_a_shard_of_calls_as_well,
    "blocks out of order in their shard": _blocks_out_of_order_in_their_shard,
    "a block at the end of the shard before": _a_block_at_the_end_of_the_shard_before,
    "a table changed under its name": _a_table_changed_under_its_name,
    "call lines out of order": _call_lines_out_of_order,
    "a call line in another digit's shard": _a_call_line_in_another_digit_s_shard,
    "a block spelled otherwise": _a_block_spelled_otherwise,
    "a block unused": _a_block_unused,
    "a manifest byte": _a_manifest_byte,
    "a manifest without its last newline": _a_manifest_without_its_last_newline,
    "an item's run split in two in its table": _an_item_s_run_split_in_two_in_its_table,
    "no tables (written before them)": _no_tables_written_before_them,
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_folder_the_writer_would_not_write_is_written_again(tmp_path: Path, fault: str) -> None:
    calls = _calls(CALLS)
    directory = _written(tmp_path, calls)
    canonical = _bytes(directory)
    FAULTS[fault](directory)
    assert _bytes(directory) != canonical
    index = index_stage(directory)  # the reader takes it as the recording
    assert len(index.lines) == CALLS
    inode = _manifest(directory).stat().st_ino
    _replayed(directory, calls, index)
    assert _manifest(directory).stat().st_ino != inode  # the manifest renamed into place
    assert _bytes(directory) == canonical


def test_a_call_answered_otherwise_writes_the_folder(tmp_path: Path) -> None:
    calls = _calls(CALLS)
    directory = _written(tmp_path, calls)
    index = index_stage(directory)
    served = list(calls)
    old = served[7].record
    reply = old.reply.model_copy(update={"text": old.reply.text + " (again)"})
    served[7] = RecordedCall(context=served[7].context, record=CallRecord.new(old.model, old.request, reply))
    inode = _manifest(directory).stat().st_ino
    _replayed(directory, served, index)
    assert _manifest(directory).stat().st_ino != inode
    assert (
        _bytes(directory)
        == _bytes(_written(tmp_path, served, "fresh"))
        != _bytes(_written(tmp_path, calls, "old"))
    )


def test_a_call_line_holding_a_break_line_safe_escapes_is_written_escaped(tmp_path: Path) -> None:
    """A call line holding U+2028 as itself (valid JSON, the same record) is not the line the writer
    writes (line_safe escapes it): the folder is written again, the line escaped."""
    calls = with_a_raw_break(_calls(CALLS), _calls(1)[0].context)
    directory = _written(tmp_path, calls)
    canonical = _bytes(directory)
    name = _shard(directory, "calls", lambda lines: any(b"\\u2028" in line for line in lines))
    _replace(directory, name, (directory / name).read_bytes().replace(b"\\u2028", "\u2028".encode()))
    index = index_stage(directory)
    _replayed(directory, calls, index)
    assert _bytes(directory) == canonical


@pytest.mark.parametrize("kind", ["calls", "blocks"])
def test_a_shard_renamed_over_since_it_was_read_is_written_again(tmp_path: Path, kind: str) -> None:
    calls = _calls(CALLS)
    directory = _written(tmp_path, calls)
    canonical = _bytes(directory)
    index = index_stage(directory)
    name = _shard(directory, kind)
    copy = directory / "copy.tmp"
    copy.write_bytes((directory / name).read_bytes())
    copy.replace(directory / name)  # the same bytes, another file than the one read
    inode = _manifest(directory).stat().st_ino
    _replayed(directory, calls, index)
    assert _manifest(directory).stat().st_ino != inode and _bytes(directory) == canonical


@pytest.mark.parametrize("kind", ["calls", "blocks"])
def test_a_shard_edited_in_place_since_it_was_read_is_not_left(tmp_path: Path, kind: str) -> None:
    """A shard's bytes changed in place (the same inode) after the recording was read: it no longer
    hashes to what was verified, so the write either refuses a line changed on disk or writes the
    verified bytes over it; never is the edited file left as the recording's."""
    calls = _calls(CALLS)
    directory = _written(tmp_path, calls)
    canonical = _bytes(directory)
    index = index_stage(directory)
    edited_in_place(directory / _shard(directory, kind))
    if replayed_unless_refused(directory, calls, index):
        assert _bytes(directory) == canonical


@pytest.mark.parametrize("serve", ["chat", "serve by key"])
def test_a_session_replaying_a_sharded_stage_leaves_its_folder_in_place(tmp_path: Path, serve: str) -> None:
    calls = _calls(CALLS)
    (tmp_path / "recordings").mkdir()
    directory = _written(tmp_path / "recordings", calls)
    _aged(directory)
    before = _stamps(directory)
    assert session_replayed(tmp_path, calls, serve) == [] and _stamps(directory) == before


def test_a_shard_file_unnamed_since_the_read_goes_as_after_a_write(tmp_path: Path) -> None:
    """A file named like a shard that the manifest does not name, put there after the recording was
    read: a write drops it after its rename; a folder left in place drops it too, and stays."""
    calls = _calls(CALLS)
    directory = _written(tmp_path, calls)
    index = index_stage(directory)
    before = _stamps(directory)
    stray = directory / f"calls-0-{'0' * 16}.jsonl"
    stray.write_bytes(b"")
    _replayed(directory, calls, index)
    assert not stray.exists() and _stamps(directory) == before
