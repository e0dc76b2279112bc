"""A session's misses and its close (branch mend-close; faults review10 found and left).

- `serve` (a call the stage adopts from its dry run) counts a replay miss as `chat` does: in the
  session's misses and the run's summary; the progress line counts neither.
- A failed stage whose close fails too (a line it served was since edited in place, so its seed is
  refused) raises its own error first, the close's named after it.
- A close whose recording cannot be written still writes the seeds it gathered (a finished call is
  never lost) and closes the store; a store whose seeds cannot be written still closes its
  databases. The first error is raised after.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from pipeline.errors import ConfigError, CorruptRecordError, ReplayMissError
from pipeline.llm import stage as stage_module
from pipeline.llm.cache.store import CallStore
from pipeline.llm.recordings import stage_writer
from pipeline.llm.records import ServedCall
from pipeline.llm.session import LLMSession
from pipeline.llm.types import CallContext
from tests.helpers import make_session
from tests.test_recordings import _calls
from tests.test_serve_adopted import _tamper

pytestmark = pytest.mark.usefixtures("fresh_memo")


def _served(root: Path, n: int = 5) -> tuple[LLMSession, list[Any]]:
    """A replay session that served `n - 1` recorded calls by key, as an adopting stage does."""
    calls = _calls(n)
    stage_writer.write_stage(root / "recordings" / "judge", calls)
    session, _ = make_session(root, "replay")
    for call in calls:
        assert session.served_checksum(call.record.key) == call.record.checksum
    for call in calls[:-1]:
        session.serve(call.record.key, call.context)
    return session, calls


def _cached(root: Path) -> list[str]:
    store = CallStore(root / "cache")
    try:
        return sorted(str(key) for key in store.entries())
    finally:
        store.close()


def test_a_call_serve_does_not_find_is_a_replay_miss_counted_as_chat_counts_one(tmp_path: Path) -> None:
    stage_writer.write_stage(tmp_path / "recordings" / "judge", _calls(2))
    session, _ = make_session(tmp_path, "replay")
    shown: list[ServedCall] = []
    session.observe_served(shown.append)  # the progress line's observer
    unknown = "jl2:" + "0" * 64
    context = CallContext(stage="judge", item="1", step=0)
    with pytest.raises(ReplayMissError) as missed:
        session.serve(unknown, context)
    assert session.stats.misses == [missed.value]
    assert (session.stats.hits, session.stats.model_calls, shown) == (0, 0, [])
    session.close(write_recording=False)
    summary = json.loads((tmp_path / "runs" / "judge.json").read_text(encoding="utf-8"))
    assert (summary["replay_misses"], summary["hits"], summary["model_calls"]) == (1, 0, 0)


def test_a_failed_stage_s_own_error_is_raised_before_its_close_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session, calls = _served(tmp_path)
    _tamper(tmp_path, calls[2])  # a served line edited in place: its seed is refused at close
    monkeypatch.setattr(stage_module, "check_recordings_here", lambda params, stage: None)
    monkeypatch.setattr(stage_module, "open_session", lambda params, stage: session)
    with pytest.raises(ConfigError) as raised, stage_module.recorded_session(cast(Any, None), "judge"):
        raise ConfigError("the stage's own error")
    message = raised.value.message
    assert message.startswith("the stage's own error\n")
    assert "closing its session after this error failed too: CorruptRecordError" in message
    assert any("CorruptRecordError" in note for note in raised.value.__notes__)
    # the other calls' seeds were written all the same
    assert set(_cached(tmp_path)) == {c.record.key for c in calls[:-1]} - {calls[2].record.key}


def test_a_failed_stage_whose_close_succeeds_raises_its_error_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session, calls = _served(tmp_path)
    monkeypatch.setattr(stage_module, "check_recordings_here", lambda params, stage: None)
    monkeypatch.setattr(stage_module, "open_session", lambda params, stage: session)
    with pytest.raises(ConfigError) as raised, stage_module.recorded_session(cast(Any, None), "judge"):
        raise ConfigError("the stage's own error")
    assert raised.value.message == "the stage's own error"
    assert not getattr(raised.value, "__notes__", [])
    assert set(_cached(tmp_path)) == {c.record.key for c in calls[:-1]}


def test_a_recording_that_cannot_be_written_loses_no_seed_and_closes_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session, calls = _served(tmp_path)
    assert _cached(tmp_path) == []  # the seeds gathered, not yet written
    closed: list[str] = []
    store = session.store
    assert store is not None
    close = store.close

    def closing() -> None:
        closed.append("store")
        close()

    monkeypatch.setattr(store, "close", closing)

    def unwritable(*args: Any, **kwargs: Any) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(session.recording, "write", unwritable)
    with pytest.raises(OSError, match="No space left"):
        session.close()
    assert closed == ["store"]
    assert set(_cached(tmp_path)) == {c.record.key for c in calls[:-1]}
    summary = json.loads((tmp_path / "runs" / "judge.json").read_text(encoding="utf-8"))
    assert summary["hits"] == len(calls) - 1


def test_a_store_whose_seeds_fail_still_closes_its_databases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = CallStore(tmp_path / "cache")
    closed: list[str] = []
    monkeypatch.setattr(store._cache, "close", lambda: closed.append("entries"))
    monkeypatch.setattr(store.blocks.cache, "close", lambda: closed.append("blocks"))

    def refused() -> int:
        raise CorruptRecordError("a line changed on disk")

    monkeypatch.setattr(store, "flush", refused)
    with pytest.raises(CorruptRecordError, match="changed on disk"):
        store.close()
    assert closed == ["entries", "blocks"]
    monkeypatch.undo()
    store.close()
