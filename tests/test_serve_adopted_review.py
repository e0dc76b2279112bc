"""A hostile review of serving an adopted call from its recording line (review10, of serve-adopted:
LLMSession._served_by_line, StageIndex.kept_at). Two faults, each shown on the merged code:

- A line kept by its opening alone: JSON lets an object name a member twice and a parse reads the
  last, so a verified line can open with one checksum and context and record another. A replay
  kept it as the line of the call its opening names, so the recording written (and `judgeloop
  audit`) then showed another reply, or another context, than the one the stage was served. Both
  ways of serving a hit kept it (StageIndex.verbatim_at, replay-serve's, and kept_at share
  `_opening`); such a line is now found only by a parse.
- A call counted before its seed: where the local cache's seed batch fails to write, the call was
  already in the served log, the hit count and the progress line, though `serve` raised (looked up
  with its record, the seed fails before the call is logged)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from pipeline.errors import CorruptRecordError, JudgeloopError
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.cache import bulk
from pipeline.llm.cache import store as store_module
from pipeline.llm.cache.store import CallStore
from pipeline.llm.recordings import (
    shards,
    stage_folders,
    stage_index,
    stage_reader,
    stage_writer,
)
from pipeline.llm.records import CallRecord, RecordedCall, ServedCall
from pipeline.llm.session import LLMSession
from pipeline.llm.types import CallContext
from tests import test_serve_adopted as adopted_tests
from tests.helpers import make_session
from tests.test_recordings import _calls

pytestmark = pytest.mark.usefixtures("fresh_memo")


def _at(call: RecordedCall, step: int) -> CallContext:
    return call.context.model_copy(update={"step": step})


def _misleading(root: Path, twice: str) -> tuple[list[RecordedCall], RecordedCall]:
    """A recording whose key K is recorded at step 0 (checksum C) and again in a line that opens with
    C and the context of step 9 but holds, further on, another `twice`: a record of another reply
    (checksum D) for step 9, or C's record for step 5. Returns the calls a replay asks (step 9 among
    them, with C's record: K's first line is what `lookup` serves) and the call the line records."""
    calls = _calls(4)
    first = calls[1]
    asked = RecordedCall(context=_at(first, 9), record=first.record)
    if twice == "checksum":
        reply = first.record.reply.model_copy(update={"text": "another reply, never served"})
        held = RecordedCall(
            context=asked.context,
            record=CallRecord.new(FakeBackend().identity(), first.record.request, reply),
        )
    else:
        held = RecordedCall(context=_at(first, 5), record=first.record)
    directory = root / "recordings" / "judge"
    stage_writer.write_stage(directory, [*calls, held])
    path = directory / stage_folders.CALLS_FILE
    lines = path.read_text(encoding="utf-8").split("\n")
    (number,) = [n for n, line in enumerate(lines) if f'"step":{held.context.step}' in line]
    line = lines[number]
    shown = line[line.index(',"context":') : line.index(',"created_at":')]  # `,"context":{...}`
    if twice == "context":
        shown = shown.replace('"step":5', '"step":9')
    lines[number] = f'{{"checksum":"{first.record.checksum}"{shown},{line[1:]}'
    path.write_text("\n".join(lines), encoding="utf-8")
    return [*calls, asked], held


def _by_call(calls: list[RecordedCall]) -> dict[tuple[Any, str], CallRecord]:
    return {(call.context.sort_key(), call.record.key): call.record for call in calls}


@pytest.mark.parametrize("records", [False, True], ids=["from its line", "with its record"])
@pytest.mark.parametrize("twice", ["checksum", "context"])
def test_a_line_that_opens_as_another_call_is_not_kept_for_it(
    tmp_path: Path, twice: str, records: bool
) -> None:
    asked, held = _misleading(tmp_path, twice)
    directory = tmp_path / "recordings" / "judge"
    before = _by_call([loaded.call for loaded in stage_reader.read_stage(directory)])
    # Verified, as a parse reads the line: what it holds last.
    assert before[(held.context.sort_key(), held.record.key)] == held.record
    session, backend = make_session(tmp_path, "replay")
    if records:
        session.observe(lambda call: None)  # serve each with its record (the path before serve-adopted)
    for call in asked:  # served_alike's look
        assert session.served_checksum(call.record.key) == call.record.checksum
    for call in asked:
        session.serve(call.record.key, call.context)
    served = _by_call(session.calls)
    session.close()
    assert backend.calls == [] and served == _by_call(asked)
    # The recording holds what was served: the replies, in the contexts they were served in.
    assert _by_call([loaded.call for loaded in stage_reader.read_stage(directory)]) == served


def test_a_recording_as_written_has_no_line_that_opens_as_another(tmp_path: Path) -> None:
    """Every line the writer makes opens with what it holds (a context with a break line_safe
    escapes too), verified now or scanned by the memo: none is left to a parse."""
    calls = _calls(5)
    odd = calls[2].context.model_copy(update={"item": "a\u2028b\x85c"})
    calls.append(RecordedCall(context=odd, record=calls[2].record))
    directory = tmp_path / "judge"
    stage_writer.write_stage(directory, calls)
    verified = stage_index.index_stage(directory)
    scanned = stage_index.index_stage(directory)  # the memo holds it now
    assert verified.misopened == scanned.misopened == frozenset()
    for call in calls:
        assert verified.kept_at(call.record.key, call.record.checksum, call.context) is not None


@pytest.mark.parametrize("records", [False, True], ids=["from its line", "with its record"])
def test_a_call_whose_seed_fails_is_not_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, records: bool
) -> None:
    """The local cache cannot be written when the call's seed batch is: `serve` raises, and the call
    is in neither the served log, the hits nor the progress line (as a hit looked up with its
    record: its seed is written before it is logged)."""
    calls = _calls(3)
    stage_writer.write_stage(tmp_path / "recordings" / "judge", calls)
    session, _ = make_session(tmp_path, "replay")
    shown: list[ServedCall] = []
    session.observe_served(shown.append)
    if records:
        session.observe(lambda call: None)
    assert session.served_checksum(calls[0].record.key) == calls[0].record.checksum

    def full(*args: Any, **kwargs: Any) -> int:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(store_module, "SEED_BATCH", 1)  # each seed written at once
    monkeypatch.setattr(bulk, "add_new", full)
    with pytest.raises(JudgeloopError, match="full"):
        session.serve(calls[0].record.key, calls[0].context)
    assert (session.stats.hits, list(session.served), shown) == (0, [], [])
    monkeypatch.undo()
    session.close(write_recording=False)


@pytest.mark.parametrize("warm", [False, True])
def test_a_sharded_recording_served_from_its_lines_writes_what_serving_its_records_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, warm: bool
) -> None:
    """serve-adopted's comparison (test_serve_adopted) on a recording in shards (past SHARD_AT
    calls, made 4 here): the recording, run summary, served log, progress and cache entries are
    those of serving each record. A guard: it passes on the merged code too."""
    monkeypatch.setattr(shards, "SHARD_AT", 4)
    roots = {way: tmp_path / way for way in ("line", "record")}
    calls = adopted_tests._recorded(roots["line"], 11)
    manifest = (roots["line"] / "recordings" / "judge" / stage_folders.CALLS_FILE).read_text(encoding="utf-8")
    assert shards.is_manifest(manifest)
    shutil.copytree(roots["line"] / "recordings", roots["record"] / "recordings")
    if warm:
        for root in roots.values():
            adopted_tests._warmed(root, calls[::2])
    by_lines: list[bool] = []
    serve_by_line = LLMSession._served_by_line

    def noted(self: LLMSession, key: str, context: CallContext) -> bool:
        by_lines.append(serve_by_line(self, key, context))
        return by_lines[-1]

    monkeypatch.setattr(LLMSession, "_served_by_line", noted)
    by_line, shown, _ = adopted_tests._adopted(roots["line"], calls)
    assert by_lines == [True] * len(calls)  # each served from its line in a shard
    by_record, shown_too, observed = adopted_tests._adopted(roots["record"], calls, records=True)
    assert len(observed) == len(calls)
    assert adopted_tests._written(roots["line"]) == adopted_tests._written(roots["record"])
    assert adopted_tests._cache(roots["line"]) == adopted_tests._cache(roots["record"])
    assert list(by_line.served) == list(by_record.served) and shown == shown_too
    assert (by_line.stats.hits, by_line.stats.keys) == (by_record.stats.hits, by_record.stats.keys)


def test_a_line_changed_after_it_was_served_costs_no_other_calls_seed(tmp_path: Path) -> None:
    """The stage fails after serving its calls from their lines, and one line was edited in place
    since it was served: closing refuses to build that call's record (the line no longer matches its
    digest), and every other call served is still seeded to the local cache (the batch was lost
    whole on the merged code)."""
    calls = adopted_tests._recorded(tmp_path)
    session, _ = make_session(tmp_path, "replay")
    for call in calls:
        assert session.served_checksum(call.record.key) == call.record.checksum
    for call in calls:
        session.serve(call.record.key, call.context)
    adopted_tests._tamper(tmp_path, calls[3])
    with pytest.raises(CorruptRecordError, match=r"calls\.jsonl"):
        session.close(write_recording=False)  # as recorded_session closes a stage that failed
    store = CallStore(tmp_path / "cache")
    try:
        assert {key for key in store.entries()} == {c.record.key for c in calls} - {calls[3].record.key}
    finally:
        store.close()
