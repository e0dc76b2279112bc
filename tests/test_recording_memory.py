"""What a stage's recording being made holds a call (issue 33: a recording run's peak at a million
calls): each call's place in the order is held as a hash in a packed table and read back from its
line when needed (pipeline.llm.recordings.call_places), not as a tuple in a dict (about 190 bytes a
call before, with the place's int and the dict's slot); the write sorts a shard's calls at a time.
The same bytes on disk whatever the hashes (two calls of one hash are told apart by their lines).

The bounds are on traced bytes (tracemalloc) against the number of calls, never on time."""

from __future__ import annotations

import gc
import tracemalloc
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.recordings import call_places, shards, stage_writer
from pipeline.llm.recordings.stage_index import index_stage
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import CallContext
from tests.helpers import request

CALLS = 12_000
# Held a call besides the spool's file: the hash's slot in the table (16 bytes, at most two thirds
# full: 24 to 48 bytes a call) and the spool's 8 bytes a line: 66 measured. Before: 340 (the Where
# tuple, its item's text, the place's int, the dict's slot).
HELD_PER_CALL = 100
# At the write's peak, besides: each call's number by shard (8 bytes), one shard's Wheres read back
# and sorted (a sixteenth of the calls), each shard's table of items: 177 measured. Before: 424.
WRITE_PER_CALL = 250
FIXED_BYTES = 512 << 10


def _calls(n: int, stage: str = "judge") -> Iterator[RecordedCall]:
    """n distinct short calls (keys spread over the shards), made one at a time, none held here."""
    fake = FakeBackend()
    for i in range(n):
        req = request(f"Judge metric {i % 4} of item {i // 4}: is the summary faithful?")
        record = CallRecord.new(fake.identity(), req, fake.chat(req))
        context = CallContext(
            stage=stage, item=f"item-{i // 4:06d}", step=i % 3, labels={"metric": f"m{i % 4}"}
        )
        yield RecordedCall(context=context, record=record)


def test_a_recording_being_made_holds_a_few_bytes_a_call_and_writes_a_shard_at_a_time(tmp_path: Path) -> None:
    recording = stage_writer.StageRecording()
    calls = _calls(CALLS)
    recording.add(next(calls))  # the spool's file and the tables made before the measure starts
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for call in calls:
            recording.add(call)
        held = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.reset_peak()
        assert recording.write(tmp_path / "judge") == CALLS
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
        recording.close()
    assert held < HELD_PER_CALL * CALLS + FIXED_BYTES, f"{held / CALLS:.0f} bytes held a call"
    assert peak < WRITE_PER_CALL * CALLS + FIXED_BYTES, f"{peak / CALLS:.0f} bytes a call at the write"
    assert sum(1 for _ in index_stage(tmp_path / "judge").every_call()) == CALLS  # every line verified


def _files(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


@pytest.mark.parametrize("shard_at", [4096, 8])  # one file; shards
def test_the_same_bytes_when_every_call_shares_a_hash_with_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shard_at: int
) -> None:
    """Wheres of one hash (forced here: three hashes for every call) are told apart by their lines:
    made and kept lines, a call added twice, a hit kept: the same files as with Python's hash."""
    monkeypatch.setattr(shards, "SHARD_AT", shard_at)
    calls = list(_calls(40))
    stage_writer.write_stage(tmp_path / "before", calls[:25])
    recorded = index_stage(tmp_path / "before")

    def record(directory: Path) -> None:
        recording = stage_writer.StageRecording()
        for call in calls[:20]:  # replayed: kept as the recording's lines
            recording.add(
                RecordedCall(context=call.context, record=call.record, cache_hit=True), recorded=recorded
            )
        for call in [*calls[10:40], calls[3], calls[30]]:  # made here (wins over kept), some twice
            recording.add(call)
        assert len(recording) == 40
        assert recording.write(directory) == 40

    record(tmp_path / "python")
    monkeypatch.setattr(call_places.CallPlaces, "_hash", lambda self, where: hash(where) % 3)
    record(tmp_path / "colliding")
    assert _files(tmp_path / "colliding") == _files(tmp_path / "python")


def test_a_recording_let_go_of_is_freed_without_the_cyclic_gc() -> None:
    """A recording (a dry run's, in status or batch export) goes when its last reference does: its
    CallPlaces holds nothing of it (a bound method of it made a cycle that kept every call's place
    until the cyclic GC ran)."""
    recording = stage_writer.StageRecording()
    for call in _calls(40):
        recording.add(call)
    assert len(recording) == 40
    gone = weakref.ref(recording)
    gc.disable()
    try:
        recording.close()
        del recording
        assert gone() is None
    finally:
        gc.enable()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["set", "setdefault", "get"]), st.integers(0, 30), st.integers(0, 10**6)),
        max_size=120,
    ),
    st.integers(1, 5),
)
def test_call_places_read_as_a_dict_whatever_the_hashes(ops: list[tuple[str, int, int]], hashes: int) -> None:
    """CallPlaces against a dict: the same answers for set (replace), setdefault and get, with as few
    as one hash for every Where (each Where read back from what is held for it, as from its line)."""
    wheres: dict[int, tuple[Any, ...]] = {}  # number held -> the Where it was held for

    places = call_places.CallPlaces()
    places._hash = lambda where: hash(where) % hashes  # type: ignore[method-assign]
    model: dict[tuple[Any, ...], int] = {}
    for op, at, value in ops:
        where = ("judge", f"item-{at}", at % 4, "", (), 0, f"key-{at}")
        number = value * 64 + at  # each number names one Where, as a line does
        if op == "get":
            assert places.get(where, wheres.__getitem__) == model.get(where)
            continue
        wheres[number] = where
        if op == "set":
            places.set(where, number, wheres.__getitem__)
            model[where] = number
        else:
            places.setdefault(where, number, wheres.__getitem__)
            model.setdefault(where, number)
    assert len(places) == len(model)
    assert sorted(places.numbers()) == sorted(model.values())
