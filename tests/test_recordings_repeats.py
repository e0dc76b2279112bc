"""A prompt asked again in another context (a later refinement round asking what an earlier one
asked) is recorded as a line for each context under one key. A replay keeps each such call's own
line as it was read (StageIndex.verbatim_at asks every line of the key), rather than finding only
the key's first line, parsing it to learn that its context differs, and packing the call's 20 kB
prompt into blocks again (issue 33, branch replay-percall). The recording written back is the
same bytes either way."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.llm.recordings import stage_calls, stage_folders, stage_writer
from pipeline.llm.recordings.stage_index import StageIndex, index_stage
from pipeline.llm.recordings.stage_writer import StageRecording
from pipeline.llm.records import RecordedCall
from tests.test_recordings import _calls


def _repeated(n: int = 4) -> list[RecordedCall]:
    """`n` calls, and each again in a later step: the same record (key), another context."""
    calls = _calls(n)
    again = [
        RecordedCall(
            context=c.context.model_copy(update={"step": (c.context.step or 0) + 5}), record=c.record
        )
        for c in calls
    ]
    return calls + again


def test_each_context_of_a_key_is_found_as_its_own_line(tmp_path: Path) -> None:
    calls = _repeated()
    stage_writer.write_stage(tmp_path / "judge", calls)
    index = index_stage(tmp_path / "judge")
    assert len(index) == 4 and sum(len(later) for later in index.repeats.values()) == 4
    found = [index.verbatim_at(call) for call in calls]
    assert None not in found and len(set(found)) == len(calls)  # one line each, none shared
    for call, at in zip(calls, found, strict=True):
        assert at is not None and index.call_at(at).context == call.context
    unrecorded = calls[0].context.model_copy(update={"step": 99})
    assert index.verbatim_at(RecordedCall(context=unrecorded, record=calls[0].record)) is None


def test_a_replay_writes_every_repeated_call_back_as_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _repeated()
    stage_writer.write_stage(tmp_path / "judge", calls)
    before = (tmp_path / "judge" / stage_folders.CALLS_FILE).read_bytes()
    index = index_stage(tmp_path / "judge")

    def packed_anew(*_: object) -> str:
        raise AssertionError("a recorded call packed into a new line")

    monkeypatch.setattr(stage_calls, "call_to_line", packed_anew)
    recording = StageRecording()
    for call in reversed(calls):
        recording.add(RecordedCall(context=call.context, record=call.record, cache_hit=True), recorded=index)
    recording.write(tmp_path / "judge")
    assert (tmp_path / "judge" / stage_folders.CALLS_FILE).read_bytes() == before


def test_a_key_in_many_contexts_is_found_reading_about_a_line_a_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prompt asked for many items (the same short answer judged for each) is recorded once for each
    context under one key. A replay serves those calls in the recording's order: each is found at the
    line after the one found last, not by reading again every line before it (review7: the n-th call
    read n lines, n²/2 in all: 2,000 such calls read 2,001,000 lines, 6.6 s)."""
    first = _calls(1)[0]
    count = 200
    calls = [
        RecordedCall(context=first.context.model_copy(update={"step": step}), record=first.record)
        for step in range(count)
    ]
    stage_writer.write_stage(tmp_path / "judge", calls)
    index = index_stage(tmp_path / "judge")
    read = StageIndex.line
    reads: list[int] = []

    def counted(self: StageIndex, found: int) -> str:
        reads.append(found)
        return read(self, found)

    monkeypatch.setattr(StageIndex, "line", counted)
    found = [index.verbatim_at(call) for call in calls]
    assert None not in found and len(set(found)) == count
    assert len(reads) <= 2 * count, f"{len(reads)} lines read for {count} calls"
    for call, at in zip(calls, found, strict=True):  # each still its own line, whatever the order asked
        assert at is not None and index.call_at(at).context == call.context
    assert [index.verbatim_at(call) for call in reversed(calls)] == found[::-1]
