"""A recorded call made again on a live backend, and compared with its recording bit for bit.

What must come back the same for a live rerun to be the recorded one: the key (the model's
identity and the request hash to it), and the reply's words and numbers: its text, done reason,
token counts and per-token log-probabilities, compared as the canonical JSON the recording holds
(byte for byte, so a float that differs in its last bit differs). The reply's meta is not
compared: it holds the call's wall time, and the build it ran on is reported, not judged.

The call is made as the pipeline made it, not as the recording spells it. A recording holds the
request as canonical JSON, whose objects have their keys sorted; a JSON Schema's `properties` then
come back in alphabetical order, and llama.cpp's grammar writes a reply's properties in the order
the schema lists them. The paper's assessment asked for `assessment` first; asked from the recording
as it reads, the grammar made the model write `PHQ8_symptoms` first, and every reply differed (the
key does not see the order, so it was the same). The order is not lost: pipeline.llm.structured's
`schema_for` makes every property required and writes `required` in the properties' order, a list
that canonical JSON keeps; `as_asked` puts the properties back in that order. (Every backend now
does the same to whatever it is sent, pipeline.llm.schema_order, so that a reply depends on its key
alone; `as_asked` stays, so that the request a rerun hands over reads as the pipeline's.)

Used by bench/live_rerun.py (every recorded embedded call of every demo) and by the embedded CI
test (tests/test_live_rerun.py, a handful of them).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pipeline.llm.keys import canonical_json, request_key
from pipeline.llm.records import CallRecord
from pipeline.llm.schema_order import schema_in_field_order
from pipeline.llm.settings import LLMSettings
from pipeline.llm.types import Backend, ChatReply, ChatRequest

__all__ = ["Rerun", "as_asked", "live_backend", "reply_bytes", "rerun", "schema_in_field_order"]

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


def as_asked(request: ChatRequest) -> ChatRequest:
    """The recorded request as the pipeline asked it: its schema's properties in their field order.
    The same key (canonical JSON sorts them again), and the same grammar as the recorded call's."""
    if not isinstance(request.format, dict):
        return request
    return request.model_copy(update={"format": schema_in_field_order(request.format)})


def live_backend(settings: LLMSettings, cache_dir: Path) -> Backend:
    """The backend a stage's session builds from these settings (pipeline.llm.session.open_session)."""
    from pipeline.llm.backends import make_backend  # a backend may pull in heavy imports

    return make_backend(settings, cache_dir)


def rerun(records: Iterable[CallRecord], backend: Backend) -> Iterable[Rerun]:
    """Each recorded request asked again of `backend` as the pipeline asked it, one at a time, in
    the order given."""
    identity = backend.identity()
    for record in records:
        yield Rerun(record, request_key(identity, record.request), backend.chat(as_asked(record.request)))
