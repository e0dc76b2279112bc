"""The cache wrapped around a backend: modes, replay misses, in-flight deduplication, errors."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pipeline.errors import CorruptRecordError, ReplayIncompleteError, ReplayMissError, TransientBackendError
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.cache.store import CallStore, seal
from pipeline.llm.recordings import stage_reader, stage_writer
from pipeline.llm.settings import in_flight
from pipeline.llm.types import CallContext, ChatRequest
from tests.helpers import make_session, request

CTX = CallContext(stage="judge", item="901", step=0, labels={"metric": "coherence"})


def test_auto_mode_calls_once_then_hits(tmp_path: Path) -> None:
    session, fake = make_session(tmp_path)
    first = session.chat(request("hello"), CTX)
    second = session.chat(request("hello"), CTX)
    assert len(fake.calls) == 1
    assert (first.cache_hit, second.cache_hit) == (False, True)
    assert first.record == second.record
    assert (session.stats.hits, session.stats.model_calls) == (1, 1)


def test_a_new_session_hits_what_an_earlier_one_stored(tmp_path: Path) -> None:
    session, _ = make_session(tmp_path)
    stored = session.chat(request("hello"), CTX).record
    session.close()
    again, fake = make_session(tmp_path)
    assert again.chat(request("hello"), CTX).record == stored
    assert fake.calls == []


def test_refresh_calls_every_time_and_overwrites(tmp_path: Path) -> None:
    session, _ = make_session(tmp_path)
    session.chat(request("hello"), CTX)
    session.close()
    replies = iter(["one", "two"])
    refresh, fake = make_session(tmp_path, "refresh", responder=lambda r: next(replies))
    assert refresh.chat(request("hello"), CTX).record.reply.text == "one"
    refresh.close()
    auto, _ = make_session(tmp_path)
    assert auto.chat(request("hello"), CTX).record.reply.text == "one"
    assert len(fake.calls) == 1


def test_off_mode_stores_nothing_locally_but_still_records(tmp_path: Path) -> None:
    session, fake = make_session(tmp_path, "off")
    session.chat(request("hello"), CTX)
    session.chat(request("hello"), CTX)
    assert len(fake.calls) == 2
    session.close(write_recording=False)
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())
    auto, fake2 = make_session(tmp_path)
    auto.chat(request("hello"), CTX)
    assert len(fake2.calls) == 1


def test_replay_never_calls_and_lists_every_miss(tmp_path: Path) -> None:
    session, _ = make_session(tmp_path)
    session.chat(request("recorded"), CTX)
    session.close()
    replay, fake = make_session(tmp_path, "replay")
    assert replay.chat(request("recorded"), CTX).cache_hit
    other = CallContext(stage="judge", item="902", step=3, labels={"metric": "accuracy"})
    for ctx, text in ((CTX, "missing one"), (other, "missing two")):
        with pytest.raises(ReplayMissError):
            replay.chat(request(text), ctx)
    assert fake.calls == []
    with pytest.raises(ReplayIncompleteError) as info:
        replay.raise_for_misses()
    message = info.value.message
    assert "2 call(s)" in message
    assert "item=901" in message and "metric=coherence" in message
    assert "item=902" in message and "step=3" in message and "metric=accuracy" in message


def test_errors_are_never_cached(tmp_path: Path) -> None:
    attempts = []

    def flaky(req: ChatRequest) -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise TransientBackendError("server busy")
        return "fine"

    session, _ = make_session(tmp_path, responder=flaky)
    with pytest.raises(TransientBackendError):
        session.chat(request("x"), CTX)
    assert session.chat(request("x"), CTX).record.reply.text == "fine"
    assert len(attempts) == 2


def test_identical_requests_in_flight_are_sent_once(tmp_path: Path) -> None:
    gate = threading.Event()

    def slow(req: ChatRequest) -> str:
        gate.wait(5)
        return "slow reply"

    session, fake = make_session(tmp_path, responder=slow)
    results = []
    threads = [
        threading.Thread(target=lambda: results.append(session.chat(request("same"), CTX))) for _ in range(8)
    ]
    for t in threads:
        t.start()
    time.sleep(0.2)
    gate.set()
    for t in threads:
        t.join(5)
    assert len(results) == 8
    assert len(fake.calls) == 1
    assert {r.record.key for r in results} == {results[0].record.key}


def test_identity_digest_is_part_of_the_key(tmp_path: Path) -> None:
    session, _ = make_session(tmp_path, backend=FakeBackend(digest="sha256:one"))
    session.chat(request("hello"), CTX)
    session.close()
    other, fake = make_session(tmp_path, backend=FakeBackend(digest="sha256:two"))
    assert not other.chat(request("hello"), CTX).cache_hit
    assert len(fake.calls) == 1


@pytest.mark.parametrize(
    "stored",
    [
        b"[1, 2]\n{}",
        b'{"key": "k"}\n{}',
        b'{"model": [1]}\n{}',
        b'{"model": {"digest": {}}}\n{}',
        b"nope\n{}",
    ],
)
def test_a_stored_value_that_is_not_a_record_is_reported_not_raised_raw(
    tmp_path: Path, stored: bytes
) -> None:
    store = CallStore(tmp_path / "cache")
    store.put_raw("jl2:0", stored)
    with pytest.raises(
        CorruptRecordError, match=r"(?s)the entry for jl2:0 cannot be read .*cache verify --repair"
    ):
        store.get("jl2:0", request("x"))
    # The same in today's format, sealed: the seal holds, the content still is no record.
    header, _, rest = stored.partition(b"\n")
    store.put_raw("jl2:0", b"jlr2 " + seal(header) + b"\n" + header + b"\n" + rest)
    with pytest.raises(
        CorruptRecordError, match=r"(?s)the entry for jl2:0 (cannot be read|is foreign).*--repair"
    ):
        store.get("jl2:0", request("x"))


def test_hits_share_one_model_identity_object(tmp_path: Path) -> None:
    session, _ = make_session(tmp_path)
    context = CallContext(stage="judge")
    for text in ("a", "b"):
        session.chat(request(text), context)
    session.close(write_recording=False)  # hits from the local store (a recording is served first)
    again, _ = make_session(tmp_path)
    first, second = (again.chat(request(text), context) for text in ("a", "b"))
    assert first.cache_hit and second.cache_hit
    assert first.record.model is second.record.model and first.record.model == again.identity
    again.close()


def test_a_context_recorded_with_named_fields_reads_as_labels() -> None:
    # Recordings made before contexts were generic wrote iteration, metric and role as fields.
    old = {
        "stage": "judge",
        "item": "901",
        "iteration": 2,
        "metric": "accuracy",
        "role": "judge",
        "attempt": 1,
    }
    context = CallContext.model_validate(old)
    assert context == CallContext(
        stage="judge", item="901", step=2, attempt=1, labels={"metric": "accuracy", "role": "judge"}
    )
    assert context.describe() == "stage=judge item=901 step=2 metric=accuracy role=judge attempt=1"


def test_items_in_progress_double_the_server_slots_but_a_single_slot_runs_alone(tmp_path: Path) -> None:
    # Against a server with several slots, as many items again prepare and digest calls while the
    # others wait on it; the bound on what reaches the server is the backend's (in_flight).
    assert [in_flight(slots) for slots in (1, 2, 4, 8)] == [1, 4, 8, 16]
    for slots, workers in ((1, 1), (4, 8)):
        session, _ = make_session(tmp_path / str(slots), backend=FakeBackend(parallelism=slots))
        assert session.workers == workers
    replay, _ = make_session(tmp_path / "replay", "replay", backend=FakeBackend(parallelism=4))
    # No server: every call a hit served under the GIL, so one item at a time and its calls in turn
    # (threads cost a replay about a tenth of its CPU: bench/README.md, "A replay on one thread").
    assert replay.workers == 1 and not replay.calls_at_once
    assert session.calls_at_once  # (the last live one)


def test_recordings_are_read_only_when_the_local_cache_misses(tmp_path: Path) -> None:
    session, _ = make_session(tmp_path)
    session.chat(request("stored locally"), CTX)
    session.close()
    broken = tmp_path / "recordings" / "other_stage"
    broken.mkdir()
    (broken / "calls.jsonl").write_text("not a recorded call\n")
    again, fake = make_session(tmp_path)
    assert again.chat(request("stored locally"), CTX).cache_hit  # never read the broken file
    assert again.index.damaged() == []
    # A miss looks in the recordings: another stage's damage is left out, not this stage's failure.
    assert not again.chat(request("a new question"), CTX).cache_hit
    assert len(fake.calls) == 1
    [damage] = again.index.damaged()
    assert "other_stage/calls.jsonl:1: not a recorded call" in damage


def test_the_recording_holds_each_call_once_in_order_whatever_order_calls_finish(tmp_path: Path) -> None:
    contexts = [CallContext(stage="judge", item=str(900 + n), step=0) for n in range(6)]
    session, _ = make_session(tmp_path)
    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(lambda c: session.chat(request(f"item {c.item}"), c), reversed(contexts)))
    session.chat(request("item 900"), contexts[0])  # the same call again: one line
    session.close()
    written = (tmp_path / "recordings" / "judge" / "calls.jsonl").read_bytes()
    calls = [c.call for c in stage_reader.read_stage(tmp_path / "recordings" / "judge")]
    assert [c.context.item for c in calls] == [c.item for c in contexts]
    stage_writer.write_stage(tmp_path / "again", calls)  # the batch writer gives the same bytes
    assert (tmp_path / "again" / "calls.jsonl").read_bytes() == written
