"""A dry run's calls held as digests (pipeline.tools.status.probe.DryCall): the stage adopts the dry
run only when the session serves each call the very reply the dry run was given."""

from __future__ import annotations

import tracemalloc

from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import CallContext, ChatReply, ChatRequest, Message, ModelIdentity
from pipeline.tools.status.probe import DryCall, DryLog, placeholder, reply_digest
from stages.runner import served_alike

MODEL = ModelIdentity(backend="fake", name="m", digest="d")
REQUEST = ChatRequest(messages=(Message(role="user", content="Rate this."),))


def record(text: str, **reply: object) -> CallRecord:
    return CallRecord.new(MODEL, REQUEST, ChatReply(text=text, **reply))


class Session:
    """What served_alike asks of an LLMSession: the record it would serve for a key."""

    def __init__(self, served: CallRecord) -> None:
        self.served = served

    def served_checksum(self, key: str) -> str | None:
        return None  # never says: every call is looked up whole

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


def test_dry_log_reads_back_each_call_as_answered() -> None:
    """The dry run's calls kept on disk (DryLog, issue 33): read back, each is the DryCall it was,
    its context field for field (the fields given, too); tally counts the known replies and those
    the local cache alone gave, without building a context."""
    calls = [
        dry(record("Score: 4")),
        DryCall.of(
            RecordedCall(
                CallContext(stage="judge", item="b", step=2).at(metric="m"),
                CallRecord.new(
                    MODEL,
                    ChatRequest(messages=(Message(role="user", content="b"),)),
                    ChatReply(text=placeholder("k")),
                ),
            )
        ),
        DryCall.of(RecordedCall(CallContext(stage="refine", item="c", attempt=1), record("Score: 5"))),
    ]
    log = DryLog()
    for call in calls:
        log.append(call)
    back = list(log)
    assert back == calls and len(log) == 3
    assert [c.context.model_fields_set for c in back] == [c.context.model_fields_set for c in calls]
    assert log.tally(set()) == (2, 0)
    assert log.tally({calls[1].key}) == (2, 0)  # a placeholder is no reply from the local cache
    assert log.tally({calls[0].key}) == (2, 2)  # one request, twice: both from the local cache
    assert served_alike(Session(record("Score: 4")), DryLog())  # type: ignore[arg-type]
    log.close()
    assert list(log) == []


def test_dry_log_holds_no_context() -> None:
    """A dry run holds 8 bytes a call, not the call's context (a list of DryCalls held about 1.5 kB
    a call: the largest part of `status --all` and of a stage's dry run at a million calls)."""
    log = DryLog()
    rec = record("Score: 4")
    context = CallContext(stage="judge", item="301", step=2)
    log.append(dry(rec))  # the file opened
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(3000):
            log.append(DryCall.of(RecordedCall(context.at(metric=f"m{n}", attempt=n % 3), rec)))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 3000 * 16 + 8192, held
    assert [c.context.label("metric") for c in log][1:] == [f"m{n}" for n in range(3000)]
