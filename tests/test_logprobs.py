"""Log-probabilities: asked for, carried by the reply, kept by the cache and the recordings (what
they say about a score is tests/test_geval.py's)."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from pipeline.llm.cache.store import CallStore
from pipeline.llm.keys import canonical_json
from pipeline.llm.logprobs import FLOOR, read_wire_logprobs
from pipeline.llm.recordings import stage_reader, stage_writer
from pipeline.llm.types import CallContext, ChatReply, ChatRequest, Message, TokenLogprob, TopLogprob
from tests.helpers import make_session

CTX = CallContext(stage="judge", item="901", labels={"metric": "coherence"})
VERDICT = '{"explanation": "fine", "score": 4}'


def ask(logprobs: int | None) -> ChatRequest:
    return ChatRequest(messages=(Message(role="user", content="Judge."),), format="json", logprobs=logprobs)


def test_asked_for_they_come_with_the_reply(tmp_path: Path) -> None:
    session, _ = make_session(tmp_path, responder=lambda r: VERDICT)
    reply = session.chat(ask(3), CTX).record.reply
    assert reply.logprobs is not None and "".join(t.token for t in reply.logprobs) == VERDICT
    assert all(len(t.top) == 3 and t.top[0].token == t.token for t in reply.logprobs)
    assert session.chat(ask(None), CTX).record.reply.logprobs is None


def test_they_survive_the_cache_and_a_recording_round_trip(tmp_path: Path) -> None:
    session, _ = make_session(tmp_path, responder=lambda r: VERDICT)
    call = session.chat(ask(5), CTX)
    assert call.record.reply.logprobs
    session.close()
    loaded = [c.call for c in stage_reader.read_stage(tmp_path / "recordings" / "judge")]
    assert [c.record for c in loaded] == [call.record]  # read_stage verifies the checksum too
    store = CallStore(tmp_path / "cache")
    assert store.get(call.record.key) == call.record
    store.close()
    # A fresh clone replays them with no model.
    stage_writer.write_stage(tmp_path / "clone" / "recordings" / "judge", loaded)
    replay, fake = make_session(tmp_path / "clone", "replay")
    assert replay.chat(ask(5), CTX).record.reply.logprobs == call.record.reply.logprobs
    assert fake.calls == []


def test_a_reply_without_them_dumps_as_before_they_existed() -> None:
    # Recorded replies are checksummed over their dump: an added null field would break them all.
    reply = ChatReply(text="x", done_reason="stop", prompt_tokens=1, completion_tokens=1)
    assert canonical_json(reply.model_dump(mode="json")) == (
        '{"completion_tokens":1,"done_reason":"stop","meta":{},"prompt_tokens":1,"text":"x"}'
    )


def test_wire_entries_are_read_and_minus_infinity_is_floored() -> None:
    entries = [
        {
            "token": "4",
            "logprob": -0.1,
            "bytes": [52],
            "top_logprobs": [{"token": "4", "logprob": -0.1}, {"token": "x", "logprob": float("-inf")}],
        },
        {"token": "}", "logprob": None},  # no number: skipped
    ]
    read = read_wire_logprobs(entries)
    assert read == (
        TokenLogprob(
            token="4",
            logprob=-0.1,
            top=(TopLogprob(token="4", logprob=-0.1), TopLogprob(token="x", logprob=FLOOR)),
        ),
    )
    assert read_wire_logprobs(None) is None


ROOT = Path(__file__).resolve().parents[1]


def test_they_dump_as_json_objects_and_validate_like_a_model() -> None:
    reply = ChatReply(
        text="4}",
        logprobs=(
            TokenLogprob(
                token="4", logprob=-0.1, top=(TopLogprob(token="4", logprob=-0.1), TopLogprob("5", -3))
            ),
            TokenLogprob(token="}", logprob=0),
        ),
    )
    assert reply.model_dump(mode="json")["logprobs"] == [
        {
            "token": "4",
            "logprob": -0.1,
            "top": [{"token": "4", "logprob": -0.1}, {"token": "5", "logprob": -3.0}],
        },
        {"token": "}", "logprob": 0.0, "top": []},
    ]
    assert ChatReply.model_validate_json(reply.model_dump_json()) == reply
    assert reply.logprobs is not None
    assert reply.logprobs[-1] == TokenLogprob("}", 0.0) and reply.logprobs[1:] == (TokenLogprob("}", 0.0),)
    assert reply.logprobs[0].top[1] == TopLogprob(token="5", logprob=-3.0)
    with pytest.raises(IndexError):
        reply.logprobs[2]
    for bad in ({"token": "4", "logprob": "high"}, {"token": "4", "logprob": -0.1, "bytes": [52]}):
        with pytest.raises(ValueError):
            ChatReply.model_validate({"text": "4", "logprobs": [bad]})


def test_the_garbage_collector_does_not_walk_them() -> None:
    # A stage keeps every reply it served; tracked objects per token would make each full
    # collection walk them all (bench/rag_batch.py measured half-second pauses).
    wire = [
        {
            "token": f"t{i}",
            "logprob": -0.5,
            "top_logprobs": [{"token": f"a{j}", "logprob": -1.0} for j in range(5)],
        }
        for i in range(200)
    ]
    gc.collect()
    before = len(gc.get_objects())
    replies = [ChatReply(text="x", logprobs=read_wire_logprobs(wire)) for _ in range(50)]
    gc.collect()
    tracked = len(gc.get_objects()) - before
    assert len(replies) == 50 and tracked < 50 * 10  # 1,200 entries a reply; a few objects each reply


@pytest.mark.parametrize("stage", ["rag_judge", "summeval_judge", "judge"])
def test_committed_recordings_with_them_still_verify(stage: str) -> None:
    # Their checksums cover the JSON written when they were recorded: the shape may not change.
    loaded = [c.call for c in stage_reader.read_stage(ROOT / "recordings" / stage)]  # verifies each
    with_logprobs = [c for c in loaded if c.record.reply.logprobs]
    assert with_logprobs
    for call in with_logprobs:
        assert call.record.expected_checksum() == call.record.checksum
