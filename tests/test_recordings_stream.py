"""A stage's recording spooled as it is made and written streamed (issue 33): the same bytes as the
recording held whole, replayed lines kept as read, the old file whole when a line cannot be written."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.errors import UnwritableTextError
from pipeline.llm.recordings import line_format, stage_folders, stage_writer
from pipeline.llm.recordings.stage_index import index_stage
from pipeline.llm.records import RecordedCall
from pipeline.llm.types import CallContext
from tests.test_trust_recordings import make_calls


def _held_whole(calls: list[RecordedCall]) -> bytes:
    """The recording as it was written before it was spooled: every line held, sorted, joined."""
    blobs: dict[str, str] = {}
    lines = {(*c.context.sort_key(), c.record.key): line_format.call_to_line(c, blobs) for c in calls}
    text = [lines[k] for k in sorted(lines)] + [line_format.blob_line(b, blobs[b]) for b in sorted(blobs)]
    return "".join(line + "\n" for line in text).encode()


def _hit(call: RecordedCall) -> RecordedCall:
    return RecordedCall(context=call.context, record=call.record, cache_hit=True)


def test_a_spooled_recording_is_byte_for_byte_the_recording_held_whole(tmp_path: Path) -> None:
    calls = make_calls(1, n=12) + make_calls(2, n=5)
    stage_writer.write_stage(tmp_path / "judge", reversed(calls))
    assert (tmp_path / "judge" / stage_folders.CALLS_FILE).read_bytes() == _held_whole(calls)


def test_a_replay_keeps_its_lines_adds_new_ones_and_writes_the_same_bytes(tmp_path: Path) -> None:
    directory = tmp_path / "judge"
    first, second = make_calls(1, n=8), make_calls(2, n=3)
    stage_writer.write_stage(directory, first)
    recorded = index_stage(directory)
    recording = stage_writer.StageRecording()
    for call in first[:6]:  # replayed: kept as the recording's lines
        recording.add(_hit(call), recorded=recorded)
    moved = RecordedCall(context=CallContext(stage="judge", item="elsewhere"), record=first[6].record)
    recording.add(_hit(moved), recorded=recorded)  # the same record in another context: packed again
    for call in second:  # answered by the model now
        recording.add(call)
    assert recorded.verbatim_at(_hit(first[0])) is not None and recorded.verbatim_at(moved) is None
    assert recording.write(directory) == 10
    assert (directory / stage_folders.CALLS_FILE).read_bytes() == _held_whole([*first[:6], moved, *second])
    assert len(recording) == 10  # and it writes again, the same
    recording.write(tmp_path / "again")
    assert (tmp_path / "again" / stage_folders.CALLS_FILE).read_bytes() == _held_whole(
        [*first[:6], moved, *second]
    )


def test_a_line_that_cannot_be_written_leaves_the_old_recording_whole(tmp_path: Path) -> None:
    directory = tmp_path / "judge"
    calls = make_calls(1, n=4)
    stage_writer.write_stage(directory, calls)
    before = (directory / stage_folders.CALLS_FILE).read_bytes()
    bad = RecordedCall(context=CallContext(stage="judge", item="9\ud800"), record=calls[0].record)
    recording = stage_writer.StageRecording()
    for call in [*calls, bad]:
        recording.add(call)
    with pytest.raises(UnwritableTextError, match=r"calls\.jsonl: not written: line \d+ would hold a lone"):
        recording.write(directory)
    assert (directory / stage_folders.CALLS_FILE).read_bytes() == before
    assert not list(directory.glob(".*.tmp"))


def test_a_spool_places_each_line_by_its_number_and_gives_back_its_bytes() -> None:
    from pipeline.llm.recordings.spool import Spool

    spool = Spool()
    lines = ["", "a", "é" * 300, '{"k":1}', "x" * 70_000]
    places = [spool.put(line) for line in lines]
    assert places == list(range(len(lines)))  # a number each, not a tuple (issue 33: 8 bytes a line)
    assert spool.put("9\ud800") == "9\ud800"  # text UTF-8 cannot hold comes back as text, unplaced
    assert [spool.get(p) for p in reversed(places)] == [line.encode() for line in reversed(lines)]
    assert spool.put("after") == len(lines) and spool.get(len(lines)) == b"after"
    spool.close()


def test_block_shards_are_the_ranges_of_the_ids_shard_of_gives() -> None:
    """The blocks' shards taken from the sorted numbers are those shards.shard_of gives each id."""
    import random
    from array import array

    from pipeline.llm.recordings import shards
    from pipeline.llm.recordings.spool import block_shards

    rng = random.Random(7)
    chosen = [rng.getrandbits(64) for _ in range(300)]
    edges = [0, 2**64 - 1, 1 << 60, (1 << 60) - 1, 0xA << 60, (0xB << 60) - 1]
    numbers = array("Q", sorted({*chosen, *edges}))
    expected: dict[str, list[int]] = {}
    for number in numbers:
        expected.setdefault(shards.shard_of(f"{number:016x}"), []).append(number)
    got = {prefix: list(numbers[first:end]) for prefix, (first, end) in block_shards(numbers)}
    assert got == expected and list(got) == sorted(expected)
    assert list(block_shards(array("Q", [5]))) == [("0", (0, 1))]  # shards with no block: none
    assert list(block_shards(array("Q"))) == []


def test_block_lines_hold_ids_as_numbers_and_give_them_back_sorted_once() -> None:
    from pipeline.llm.recordings.spool import BlockLines

    lines = BlockLines()
    ids = ["00000000000000ff", "ffffffffffffffff", "0123456789abcdef"]
    for place, blob in enumerate(ids):
        lines.setdefault(blob, place)
    lines.setdefault(ids[0], 9)  # the first place stays
    assert ids[0] in lines and "0000000000000000" not in lines and len(lines) == 3
    assert lines.get(ids[0]) == 0 and lines.get("0000000000000001") is None
    also = {BlockLines.number("0000000000000001"), BlockLines.number(ids[1])}
    numbers = lines.numbers(also)
    assert numbers.typecode == "Q"  # 8 bytes a block, not an id's text (issue 33)
    assert [f"{n:016x}" for n in numbers] == sorted([*ids, "0000000000000001"])
    assert lines.at(numbers[0]) is None and lines.at(BlockLines.number(ids[2])) == 2
    with pytest.raises(ValueError, match="not a block id"):
        lines.setdefault("ABCDEF0123456789", 1)  # upper case: no id blob_id makes


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.integers(0, 2**64 - 1), st.integers(0, 40), st.just(2**64 - 1)),
            st.integers(0, 2**62),
        ),
        max_size=400,
    )
)
def test_id_table_reads_as_a_dict_that_keeps_the_first_value(pairs: list[tuple[int, int]]) -> None:
    """IdTable (two arrays, open addressing, grown past two thirds) against a dict's setdefault: the
    same answers for every id set and for ids never set, across its growths (issue 33)."""
    from pipeline.llm.recordings.id_table import IdTable

    table, model = IdTable(), dict[int, int]()
    for number, value in pairs:
        assert table.setdefault(number, value) == model.setdefault(number, value)
    assert len(table) == len(model) and sorted(table) == sorted(model)
    for number in [*model, 0, 1, 2**64 - 1, 12345]:
        assert table.get(number) == model.get(number) and (number in table) == (number in model)
    with pytest.raises(ValueError, match="not a 64-bit id"):
        table.get(2**64)
    with pytest.raises(ValueError, match="not a value"):
        table.setdefault(5, -1)


def test_block_lines_sorted_the_same_by_numpy_and_by_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """A large stage's ids are sorted by numpy, a small one's by sorted(): the same order either way,
    a text place among them (a line UTF-8 cannot hold) kept as text."""
    import random

    from pipeline.llm.recordings import spool

    rng = random.Random(3)
    lines = spool.BlockLines()
    ids = [f"{rng.getrandbits(64):016x}" for _ in range(500)] + ["0" * 16, "f" * 16]
    for place, blob in enumerate(ids):
        lines.setdefault(blob, place if place != 7 else "text\ud800")
    also = {rng.getrandbits(64) for _ in range(50)}
    by_python = lines.numbers(also)
    monkeypatch.setattr(spool, "SORT_IN_NUMPY_AT", 0)
    by_numpy = lines.numbers(also)
    assert by_numpy == by_python and list(by_python) == sorted({*map(spool.BlockLines.number, ids), *also})
    assert lines.get(ids[7]) == "text\ud800" and lines.get(ids[8]) == 8 and len(lines) == len(set(ids))
    lines.setdefault(ids[7], 99)  # the first place stays, text or number
    lines.setdefault(ids[8], "other")
    assert lines.get(ids[7]) == "text\ud800" and lines.get(ids[8]) == 8
