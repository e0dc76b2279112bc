"""A dry run's calls held as digests (pipeline.tools.status.probe.DryCall): the stage adopts the dry
run only when the session serves each call the very reply the dry run was given."""

from __future__ import annotations

from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import CallContext, ChatReply, ChatRequest, Message, ModelIdentity
from pipeline.tools.status.probe import DryCall, placeholder, reply_digest
from stages.runner import served_alike

MODEL = ModelIdentity(backend="fake", name="m", digest="d")
REQUEST = ChatRequest(messages=(Message(role="user", content="Rate this."),))


def record(text: str, **reply: object) -> CallRecord:
    return CallRecord.new(MODEL, REQUEST, ChatReply(text=text, **reply))


class Session:
    """What served_alike asks of an LLMSession: the record it would serve for a key."""

    def __init__(self, served: CallRecord) -> None:
        self.served = served

    def lookup(self, key: str) -> CallRecord | None:
        return self.served if key == self.served.key else None


def dry(rec: CallRecord) -> DryCall:
    return DryCall.of(RecordedCall(CallContext(stage="judge", item="a"), rec))


def test_reply_digest_tells_replies_apart() -> None:
    assert reply_digest(ChatReply(text="4")) == reply_digest(ChatReply(text="4"))
    assert reply_digest(ChatReply(text="4")) != reply_digest(ChatReply(text="5"))
    assert reply_digest(ChatReply(text="4")) != reply_digest(ChatReply(text="4", done_reason="length"))
    assert reply_digest(ChatReply(text="4", meta={"n": 1})) != reply_digest(
        ChatReply(text="4", meta={"n": 2})
    )


def test_served_alike_by_checksum_or_by_reply() -> None:
    first = record("Score: 4")
    again = record("Score: 4", meta={"total_duration": 1}).model_copy(update={"reply": first.reply})
    other = record("Score: 5")
    assert served_alike(Session(first), [dry(first)])  # type: ignore[arg-type]
    # Another record (another checksum) of the same call with the same reply: alike.
    assert again.checksum != first.checksum and again.reply == first.reply
    assert served_alike(Session(again), [dry(first)])  # type: ignore[arg-type]
    # Another reply under the same key: not alike, the stage runs.
    assert other.key == first.key and other.checksum != first.checksum
    assert not served_alike(Session(other), [dry(first)])  # type: ignore[arg-type]


def test_a_placeholder_is_marked_unknown() -> None:
    assert dry(record(placeholder("k"))).unknown
    assert not dry(record("Score: 4")).unknown
