"""A call a stage adopts from its dry run is served from its line in the stage's own recording, its
record not built (issue 33, branch serve-adopted: LLMSession.serve). The line is read back against
the digest taken when the recording was verified, kept as the recording's line for the call, counted
and shown; the local cache is seeded with the record built only where it lacks the key. Everything
the session writes is what serving the record wrote: the recording, the run summary, the served log,
the progress, the cache's entries."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pipeline.errors import CorruptRecordError
from pipeline.llm.cache.store import CallStore
from pipeline.llm.recordings import line_checks, stage_folders, stage_writer
from pipeline.llm.records import CallRecord, RecordedCall, ServedCall
from pipeline.llm.session import LLMSession
from pipeline.llm.settings import CacheMode
from tests.helpers import make_session
from tests.test_recordings import _calls

pytestmark = pytest.mark.usefixtures("fresh_memo")


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each recording line parsed into its call (its request rebuilt from its blocks), by its place."""
    seen: list[str] = []
    parse = line_checks.parse_call_line

    def counted(line: str, blobs: Any, where: str, **options: Any) -> RecordedCall:
        seen.append(where)
        return parse(line, blobs, where, **options)

    monkeypatch.setattr(line_checks, "parse_call_line", counted)
    return seen


def _recorded(root: Path, n: int = 7) -> list[RecordedCall]:
    """A stage's recording of `n` calls and one of them again in a later step (a key in two
    contexts, as refine asks a prompt again), in the order a replay adopts them."""
    calls = _calls(n)
    again = calls[1].context.model_copy(update={"step": 9})
    calls.append(RecordedCall(context=again, record=calls[1].record))
    stage_writer.write_stage(root / "recordings" / "judge", calls)
    return calls


def _adopted(
    root: Path, calls: list[RecordedCall], mode: CacheMode = "replay", *, records: bool = False
) -> tuple[LLMSession, list[ServedCall], list[RecordedCall]]:
    """A session that serves `calls` by key, as stages.runner.adopt does after served_alike asked
    each checksum, with an observer of served calls (the progress line's) and, with `records`, one
    of records too; closed."""
    session, backend = make_session(root, mode)
    shown: list[ServedCall] = []
    observed: list[RecordedCall] = []
    session.observe_served(shown.append)
    if records:
        session.observe(observed.append)
    for call in calls:
        assert session.served_checksum(call.record.key) == call.record.checksum
    for call in calls:
        session.serve(call.record.key, call.context)
    session.close()
    assert backend.calls == []
    return session, shown, observed


def _cache(root: Path) -> tuple[list[tuple[str, bytes | None]], list[tuple[Any, Any]]]:
    """The local cache's entries in the order stored, and its blocks."""
    store = CallStore(root / "cache")
    try:
        entries = [(str(key), store.get_raw(str(key))) for key in store.entries()]
        blocks = [(ident, store.blocks.cache.get(ident)) for ident in store.blocks.cache]
    finally:
        store.close()
    return entries, blocks


def _written(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for folder in ("recordings", "runs")
        for path in sorted((root / folder).rglob("*"))
        if path.is_file()
    }


def _warmed(root: Path, calls: list[RecordedCall]) -> None:
    store = CallStore(root / "cache")
    for call in calls:
        store.put(call.record)
    store.close()


@pytest.mark.parametrize("warm", [False, True])
def test_an_adopted_call_is_served_from_its_line_its_record_built_only_to_seed(
    tmp_path: Path, parses: list[str], warm: bool
) -> None:
    """No line parsed into its call while the calls are served; at close, a cold cache builds each
    key's record once to seed it, a warm one none."""
    calls = _recorded(tmp_path)
    if warm:
        _warmed(tmp_path, calls)
    session, backend = make_session(tmp_path, "replay")
    for call in calls:  # served_alike's look, which reads and verifies the recording (each line parsed)
        assert session.served_checksum(call.record.key) == call.record.checksum
    parses.clear()
    for call in calls:
        session.serve(call.record.key, call.context)
    assert parses == []
    session.close()
    keys = {call.record.key for call in calls}
    assert len(parses) == (0 if warm else len(keys))
    assert backend.calls == [] and session.stats.hits == len(calls) and session.recorded_calls == len(calls)
    store = CallStore(tmp_path / "cache")
    assert {key: store.get(key) for key in keys} == {call.record.key: call.record for call in calls}
    store.close()


@pytest.mark.parametrize("warm", [False, True])
def test_served_from_its_line_writes_what_serving_its_record_writes(tmp_path: Path, warm: bool) -> None:
    """The same recording (left in place), run summary, served log, progress and cache entries as
    a session that serves each record (an observer of records asks for them), which is how every
    adopted call was served before."""
    roots = {way: tmp_path / way for way in ("line", "record")}
    calls = _recorded(roots["line"])
    shutil.copytree(roots["line"] / "recordings", roots["record"] / "recordings")
    if warm:
        for root in roots.values():
            _warmed(root, calls)
    inode = (roots["line"] / "recordings" / "judge" / stage_folders.CALLS_FILE).stat().st_ino
    by_line, shown, _ = _adopted(roots["line"], calls)
    by_record, shown_too, observed = _adopted(roots["record"], calls, records=True)
    assert [call.record for call in observed] == [call.record for call in calls]  # the records were built
    assert _written(roots["line"]) == _written(roots["record"])
    assert (roots["line"] / "recordings" / "judge" / stage_folders.CALLS_FILE).stat().st_ino == inode
    assert _cache(roots["line"]) == _cache(roots["record"])
    assert list(by_line.served) == list(by_record.served) and shown == shown_too
    assert shown == [ServedCall(c.context, c.record.key, cache_hit=True) for c in calls]
    assert by_line.stats.keys == by_record.stats.keys and by_line.stats.hits == by_record.stats.hits
    assert by_line.calls == by_record.calls  # read back when asked: the same records


def test_a_call_in_a_context_not_recorded_is_served_with_its_record(
    tmp_path: Path, parses: list[str]
) -> None:
    """No line of the key opens with its context: the record is built and the call's line made,
    as before."""
    calls = _recorded(tmp_path)
    elsewhere = calls[0].context.model_copy(update={"item": "999"})
    session, _ = make_session(tmp_path, "replay")
    assert session.served_checksum(calls[0].record.key) == calls[0].record.checksum
    parses.clear()
    session.serve(calls[0].record.key, elsewhere)
    assert parses  # the record built
    session.close()
    lines = (tmp_path / "recordings" / "judge" / stage_folders.CALLS_FILE).read_text().splitlines()
    assert sum('"item":"999"' in line for line in lines) == 1 and session.recorded_calls == 1


def _tamper(root: Path, call: RecordedCall) -> None:
    """One byte of the call's reply edited in place: the same file, the same length."""
    path = root / "recordings" / "judge" / stage_folders.CALLS_FILE
    data = path.read_bytes()
    reply = call.record.reply.text.encode()[:12]
    at = data.index(reply) + 3
    fd = os.open(path, os.O_RDWR)
    try:
        os.pwrite(fd, b"X" if data[at : at + 1] != b"X" else b"Y", at)
    finally:
        os.close(fd)


@pytest.mark.parametrize("when", ["after it was verified", "before it was read"])
def test_a_tampered_line_is_refused_when_served_from_its_line(tmp_path: Path, when: str) -> None:
    calls = _recorded(tmp_path)
    session, _ = make_session(tmp_path, "replay")
    if when == "before it was read":
        _tamper(tmp_path, calls[3])
    else:
        for call in calls:  # served_alike's look: the recording read and verified
            assert session.served_checksum(call.record.key) == call.record.checksum
        _tamper(tmp_path, calls[3])
    for call in calls[:3]:
        if when == "after it was verified":
            session.serve(call.record.key, call.context)
    with pytest.raises(CorruptRecordError) as refused:
        session.serve(calls[3].record.key, calls[3].context)
    assert f"key {calls[3].record.key}" in refused.value.message
    assert session.stats.hits == (3 if when == "after it was verified" else 0)
    session.close(write_recording=False)


def test_the_cache_builds_a_seed_only_for_a_key_it_lacks(tmp_path: Path) -> None:
    calls = _calls(3)
    store = CallStore(tmp_path / "cache")
    store.put(calls[0].record)
    built: list[str] = []

    def later(record: CallRecord) -> Callable[[], tuple[CallRecord, None]]:
        def build() -> tuple[CallRecord, None]:
            built.append(record.key)
            return record, None

        return build

    for call in calls[:2]:
        store.seed_later(call.record.key, later(call.record))
    assert built == []
    store.seed_later(calls[2].record.key, later(calls[0].record))  # another key's record
    with pytest.raises(CorruptRecordError, match=r"is .*'s"):
        store.flush()
    assert built == [calls[1].record.key, calls[0].record.key]
    store.seed_later(calls[1].record.key, later(calls[1].record))
    store.close()
    reopened = CallStore(tmp_path / "cache")
    assert reopened.get(calls[1].record.key) == calls[1].record and calls[2].record.key not in reopened
    reopened.close()


def test_an_observer_of_records_gets_each_adopted_calls_record(tmp_path: Path) -> None:
    calls = _recorded(tmp_path)
    _, _, observed = _adopted(tmp_path, calls, records=True)
    assert observed == [RecordedCall(context=c.context, record=c.record, cache_hit=True) for c in calls]
