"""A recorded call made again on a live backend, and compared with its recording bit for bit.

What must come back the same for a live rerun to be the recorded one: the key (the model's
identity and the request hash to it), and the reply's words and numbers: its text, done reason,
token counts and per-token log-probabilities, compared as the canonical JSON the recording holds
(byte for byte, so a float that differs in its last bit differs). The reply's meta is not
compared: it holds the call's wall time, and the build it ran on is reported, not judged.

Used by bench/live_rerun.py (every recorded embedded call of every demo) and by the embedded CI
test (tests/test_live_rerun.py, a handful of them).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pipeline.llm.keys import canonical_json, request_key
from pipeline.llm.records import CallRecord
from pipeline.llm.types import Backend, ChatReply

__all__ = ["Rerun", "reply_bytes", "rerun"]

COMPARED = ("text", "done_reason", "prompt_tokens", "completion_tokens", "logprobs")


def reply_bytes(reply: ChatReply) -> str:
    """The compared part of a reply, as canonical JSON."""
    return canonical_json(reply.model_dump(mode="json", include=set(COMPARED)))


@dataclass(frozen=True)
class Rerun:
    recorded: CallRecord
    key: str  # the key the live backend's identity gives the recorded request
    reply: ChatReply

    @property
    def differs(self) -> tuple[str, ...]:
        """What is not bit-identical: "key" and the reply's fields that differ; () when none."""
        out = [] if self.key == self.recorded.key else ["key"]
        live = self.reply.model_dump(mode="json", include=set(COMPARED))
        then = self.recorded.reply.model_dump(mode="json", include=set(COMPARED))
        out += [name for name in COMPARED if canonical_json(live.get(name)) != canonical_json(then.get(name))]
        return tuple(out)

    @property
    def identical(self) -> bool:
        return not self.differs


def rerun(records: Iterable[CallRecord], backend: Backend) -> Iterable[Rerun]:
    """Each recorded request asked again of `backend`, one at a time, in the order given."""
    identity = backend.identity()
    for record in records:
        yield Rerun(record, request_key(identity, record.request), backend.chat(record.request))
