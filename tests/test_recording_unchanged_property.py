"""A property of the skip for sharded recordings (pipeline.llm.recordings.unchanged, review12): for
a random sharded recording, changed in ways the reader still accepts (lines reordered or moved to
another shard, a call line or a block in another form, a block duplicated, unused or out of place,
tables missing or split, the manifest spelled otherwise, a stray file added after the read), a
replay of some or all of its calls leaves the folder exactly as a write of the same calls would
leave it: the same file names, the same bytes. Where the skip leaves the folder, it is the one
the writer would have written; anywhere else the writer writes as before. (40 examples, about a
minute on a loaded machine; JUDGELOOP_UNCHANGED_EXAMPLES=300 for more.)"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from pipeline.errors import CorruptRecordError
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.recordings import item_table, shards, stage_folders, stage_writer, unchanged
from pipeline.llm.recordings.stage_index import index_stage
from pipeline.llm.recordings.stage_writer import StageRecording
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import CallContext
from tests.helpers import request
from tests.test_recordings import TRANSCRIPT

Shards = dict[tuple[str, str], list[bytes]]  # (kind, prefix) -> its lines, each with its "\n"


def _calls(items: list[int], blocked: list[bool]) -> list[RecordedCall]:
    fake = FakeBackend()
    calls = []
    for i, (item, long) in enumerate(zip(items, blocked, strict=True)):
        text = f"Judge metric {i}.\n{TRANSCRIPT if long else 'short'}\nAssessment {i}"
        req = request(text)
        record = CallRecord.new(fake.identity(), req, fake.chat(req))
        context = CallContext(stage="judge", item=f"{900 + item}", step=i % 2, labels={"metric": "m"})
        calls.append(RecordedCall(context=context, record=record))
    return calls


def _read(directory: Path) -> tuple[Shards, list[str]]:
    manifest = directory / stage_folders.CALLS_FILE
    entries = shards.manifest_entries(manifest, manifest.read_text())
    found: Shards = {}
    names = []
    for name, _ in entries:
        kind, prefix = shards.prefix_of(name)
        names.append(name)
        if kind != shards.TABLE_KIND:
            found[(kind, prefix)] = (directory / name).read_bytes().splitlines(keepends=True)
    return found, names


def _item(line: bytes) -> str:
    try:
        item = orjson.loads(line).get("context", {}).get("item", "")
    except (orjson.JSONDecodeError, AttributeError):
        return ""  # a line no table can name (the reader refuses the folder)
    return item if isinstance(item, str) else ""


def _laid(directory: Path, found: Shards, tables: str, manifest_end: bytes) -> None:
    """The folder made anew from `found`: each shard under the name its bytes give, a table of items
    for each shard of calls (`tables`: the writer's, none, one with an item's run split, or the
    writer's name and sha256 over a split table's bytes), the
    manifest naming them (its last "\\n" replaced by `manifest_end`)."""
    for path in directory.iterdir():
        path.unlink()
    entries: list[tuple[str, str]] = []
    table_entries: list[tuple[str, str]] = []
    for (kind, prefix), lines in sorted(found.items()):
        if not lines:
            continue
        data = b"".join(lines)
        sha = hashlib.sha256(data).hexdigest()
        name = f"{kind}-{prefix}-{sha[:16]}.jsonl"
        (directory / name).write_bytes(data)
        entries.append((name, sha))
        if kind == "calls" and tables != "none":
            pairs = [(_item(line), line) for line in lines]
            text = item_table.writers_table(name, sha, pairs)
            if tables == "split":
                text = _split(name, sha, pairs)
            table_sha = hashlib.sha256(text).hexdigest()
            table_name = f"{shards.TABLE_KIND}-{prefix}-{table_sha[:16]}.jsonl"
            # "changed under its name": the file the manifest names (as the writer's) holds a split table
            held = _split(name, sha, pairs) if tables == "changed under its name" else text
            (directory / table_name).write_bytes(held)
            table_entries.append((table_name, table_sha))
    text = shards.manifest_text(entries + table_entries).encode("utf-8")
    (directory / stage_folders.CALLS_FILE).write_bytes(text[:-1] + manifest_end)


def _split(name: str, sha: str, pairs: list[tuple[str, bytes]]) -> bytes:
    """A table the reader accepts but the writer would not write: each line a run of its own."""
    runs: list[item_table._Run] = []
    for item, line in pairs:
        runs.append(item_table._Run(item, digest=hashlib.sha256()))
        runs[-1].size, runs[-1].lines = len(line), 1
        runs[-1].digest.update(line)
    return item_table._table_text(name, sha, runs)


def _keys(found: Shards, kind: str) -> list[tuple[str, str]]:
    return [key for key in sorted(found) if key[0] == kind and found[key]]


Fault = Callable[[Shards, st.DataObject], None]


def _shuffled(found: Shards, data: st.DataObject) -> None:
    keys = _keys(found, data.draw(st.sampled_from(["calls", "blocks"])))
    if keys:
        key = data.draw(st.sampled_from(keys))
        found[key] = data.draw(st.permutations(found[key]))


def _moved(found: Shards, data: st.DataObject) -> None:
    kind = data.draw(st.sampled_from(["calls", "blocks"]))
    keys = _keys(found, kind)
    if len(keys) >= 2:
        source, target = data.draw(st.lists(st.sampled_from(keys), min_size=2, max_size=2, unique=True))
        line = found[source].pop(data.draw(st.integers(0, len(found[source]) - 1)))
        found[target].insert(data.draw(st.integers(0, len(found[target]))), line)


def _across_the_boundary(found: Shards, data: st.DataObject) -> None:
    """A shard's first line moved to the end of the shard before (the order alone cannot tell)."""
    keys = _keys(found, data.draw(st.sampled_from(["calls", "blocks"])))
    if len(keys) >= 2:
        at = data.draw(st.integers(1, len(keys) - 1))
        found[keys[at - 1]].append(found[keys[at]].pop(0))


def _respelled(found: Shards, data: st.DataObject) -> None:
    """A line in another form the reader accepts: a space before its last brace, or a "\\r" after."""
    kind = data.draw(st.sampled_from(["calls", "blocks"]))
    keys = _keys(found, kind)
    if keys:
        key = data.draw(st.sampled_from(keys))
        at = data.draw(st.integers(0, len(found[key]) - 1))
        line, end = found[key][at].rstrip(b"\n"), b"\n" if found[key][at].endswith(b"\n") else b""
        found[key][at] = data.draw(st.sampled_from([line[:-1] + b" }" + end, line + b"\r" + end]))


def _block_copied(found: Shards, data: st.DataObject) -> None:
    """A block line copied: twice in its shard, in a shard of calls, or in another shard of blocks."""
    keys = _keys(found, "blocks")
    if keys:
        key = data.draw(st.sampled_from(keys))
        line = data.draw(st.sampled_from(found[key]))
        target = data.draw(st.sampled_from(sorted(found)))
        found[target].insert(data.draw(st.integers(0, len(found[target]))), line)


def _block_dropped(found: Shards, data: st.DataObject) -> None:
    """A block's line dropped: a call that refers to it is refused by the reader, else it was unused."""
    keys = _keys(found, "blocks")
    if keys:
        key = data.draw(st.sampled_from(keys))
        found[key].pop(data.draw(st.integers(0, len(found[key]) - 1)))


def _line_copied(found: Shards, data: st.DataObject) -> None:
    """A call line twice (the same call recorded twice), or a blank line, somewhere in a shard."""
    keys = _keys(found, "calls")
    if keys:
        key = data.draw(st.sampled_from(keys))
        line = data.draw(st.sampled_from([*found[key], b"\n"]))
        target = data.draw(st.sampled_from(sorted(found)))
        found[target].insert(data.draw(st.integers(0, len(found[target]))), line)


def _last_newline_dropped(found: Shards, data: st.DataObject) -> None:
    keys = _keys(found, data.draw(st.sampled_from(["calls", "blocks"])))
    if keys:
        key = data.draw(st.sampled_from(keys))
        found[key][-1] = found[key][-1].rstrip(b"\n")


FAULTS: dict[str, Fault] = {
    "line copied": _line_copied,
    "last newline dropped": _last_newline_dropped,
    "shuffled": _shuffled,
    "moved": _moved,
    "across the boundary": _across_the_boundary,
    "respelled": _respelled,
    "block copied": _block_copied,
    "block dropped": _block_dropped,
}

STRAYS = [
    "",
    "calls-0-0123456789abcdef.jsonl",
    "items-3-0123456789abcdef.jsonl",
    "calls-x.jsonl",
    "notes.txt",
]


def _folder(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


def _served(calls: list[RecordedCall], changed: int | None) -> list[RecordedCall]:
    """`calls` as a replay serves them (hits, in another order than the file's), the one at `changed`
    answered otherwise (made once: a record holds when it was made)."""
    served = []
    for at, call in enumerate(reversed(calls)):
        record = call.record
        if at == changed:
            reply = record.reply.model_copy(update={"text": record.reply.text + " (again)"})
            record = CallRecord.new(record.model, record.request, reply)
        served.append(RecordedCall(context=call.context, record=record, cache_hit=True))
    return served


def _replay(directory: Path, served: list[RecordedCall], stray: str) -> None:
    index = index_stage(directory)
    if stray:
        (directory / stray).write_bytes(b"a stray\n")
    recording = StageRecording()
    for call in served:
        recording.add(call, recorded=index)
    recording.write(directory)


EXAMPLES = int(os.environ.get("JUDGELOOP_UNCHANGED_EXAMPLES", "40"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@dataclass
class Case:
    """One example: the calls recorded, what is changed in their folder, and how they are replayed."""

    calls: list[RecordedCall]
    faults: list[str]
    tables: str = "writer"
    manifest_end: bytes = b"\n"
    dropped: bool = False
    changed: int | None = None
    stray: str = ""


def _calls_drawn(data: st.DataObject) -> list[RecordedCall]:
    items = data.draw(st.lists(st.integers(0, 3), min_size=12, max_size=36))
    return _calls(items, data.draw(st.lists(st.booleans(), min_size=len(items), max_size=len(items))))


def _checked(case: Case, data: st.DataObject) -> None:
    """The folder a replay of `case` leaves equals, name for name and byte for byte, the one a write
    with the skip off leaves."""
    with pytest.MonkeyPatch.context() as patch, tempfile.TemporaryDirectory() as scratch:
        patch.setattr(shards, "SHARD_AT", 4)
        patch.setattr(unchanged, "WHERES_HELD", data.draw(st.sampled_from([2**18, 0])))
        left, forced = Path(scratch, "left", "judge"), Path(scratch, "forced", "judge")
        stage_writer.write_stage(left, case.calls)
        found, _ = _read(left)
        for fault in case.faults:
            FAULTS[fault](found, data)
        _laid(left, found, case.tables, case.manifest_end)
        try:
            index_stage(left)
        except CorruptRecordError:
            assume(False)  # a folder the reader refuses: no replay reads it
        shutil.copytree(left.parent, forced.parent)
        inode = (left / stage_folders.CALLS_FILE).stat().st_ino
        served = _served(case.calls[1:] if case.dropped else case.calls, case.changed)
        _replay(left, served, case.stray)
        patch.setattr(unchanged, "unchanged_file", lambda *_, **__: False)
        _replay(forced, served, case.stray)
        event("left in place" if (left / stage_folders.CALLS_FILE).stat().st_ino == inode else "written")
        assert _folder(left) == _folder(forced)


@pytest.mark.slow
@SETTINGS
@given(data=st.data())
def test_a_replay_leaves_the_folder_a_write_would_leave(data: st.DataObject) -> None:
    """Several changes at once, the replay short of a call or answered otherwise, a stray."""
    case = Case(
        _calls_drawn(data),
        data.draw(st.lists(st.sampled_from(sorted(FAULTS)), max_size=2)),
        data.draw(st.sampled_from(["writer", "writer", "none", "split", "changed under its name"])),
        data.draw(st.sampled_from([b"\n", b"\n", b"", b" \n"])),
        data.draw(st.sampled_from([False, False, False, True])),
        data.draw(st.sampled_from([None, None, None, 0, 5])),
        data.draw(st.sampled_from(["", "", "", "", *STRAYS[1:]])),
    )
    _checked(case, data)


@pytest.mark.slow
@pytest.mark.parametrize("fault", sorted(set(FAULTS) - {"block dropped"}))  # (alone, the reader refuses it)
@settings(SETTINGS, max_examples=max(10, EXAMPLES // 4))
@given(data=st.data())
def test_one_change_the_reader_accepts_leaves_the_folder_a_write_would_leave(
    data: st.DataObject, fault: str
) -> None:
    """One change alone, every call replayed as recorded: where the skip is nearest to leaving it."""
    _checked(Case(_calls_drawn(data), [fault]), data)


@pytest.mark.slow
@SETTINGS
@given(data=st.data(), tables=st.sampled_from(["none", "split", "changed under its name"]))
def test_a_table_or_manifest_the_writer_would_not_write_is_written(data: st.DataObject, tables: str) -> None:
    _checked(Case(_calls_drawn(data), [], tables), data)
    _checked(Case(_calls_drawn(data), [], manifest_end=data.draw(st.sampled_from([b"", b" \n"]))), data)
