"""A stored call: the exact request, the reply, which model answered, and when.

The same record lives in the local diskcache (one JSON value per key) and, with its context, in
the text recordings under recordings/ (see pipeline.llm.recordings.line_format). `key` addresses the request;
`checksum` (sha256) covers the whole record, so a reply edited by hand is caught by `verify()` too.

A record keeps the key recipe it was written under (pipeline.llm.keys): an older one still
verifies against its own recipe, and `current()` re-keys it, so recordings made before a recipe
change keep replaying.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from pipeline import __version__
from pipeline.errors import UnwritableTextError
from pipeline.llm.canonical import canonical_bytes
from pipeline.llm.keys import KEY_RECIPE, RECIPES, request_key
from pipeline.llm.types import CallContext, ChatReply, ChatRequest, Frozen, ModelIdentity


def _checksum(body: dict[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(canonical_bytes(body)).hexdigest()


class CallRecord(Frozen):
    key: str
    checksum: str
    recipe: int = KEY_RECIPE
    model: ModelIdentity
    request: ChatRequest
    reply: ChatReply
    created_at: str  # when the model answered, RFC 3339 UTC
    judgeloop_version: str = __version__

    @classmethod
    def new(cls, model: ModelIdentity, request: ChatRequest, reply: ChatReply) -> CallRecord:
        """The record of a call. UnwritableTextError if any of its text holds a lone surrogate, which
        can be neither hashed nor written (every reader and backend refuses one before it gets here)."""
        try:
            return cls._new(model, request, reply)
        except UnicodeEncodeError as exc:
            raise UnwritableTextError(
                f"a call to {model.name} holds a lone surrogate (\\u{ord(exc.object[exc.start]):04x}, half "
                "a character) in its prompt or reply, so no record of it can be made. Fix: find the input "
                "it came from (a JSON or YAML escape \\ud800 to \\udfff) and write the character itself"
            ) from None

    @classmethod
    def _new(cls, model: ModelIdentity, request: ChatRequest, reply: ChatReply) -> CallRecord:
        body = {
            "key": request_key(model, request),
            "recipe": KEY_RECIPE,
            "model": model,
            "request": request,
            "reply": reply,
            "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "judgeloop_version": __version__,
        }
        draft = cls.model_validate({**body, "checksum": ""})
        return draft.model_copy(update={"checksum": draft.expected_checksum()})

    def expected_checksum(self) -> str:
        return _checksum(self.model_dump(mode="json", exclude={"checksum"}))

    def problem(self) -> str | None:
        """Why this record cannot be trusted, or None."""
        derive_key = RECIPES.get(self.recipe)
        if derive_key is None:
            return (
                f"written with key recipe {self.recipe}, which judgeloop {__version__} does not know "
                f"(it knows {sorted(RECIPES)}): upgrade judgeloop"
            )
        if derive_key(self.model, self.request) != self.key:
            return "the request does not hash to the key (request edited)"
        if self.expected_checksum() != self.checksum:
            return "the checksum does not match (reply or metadata edited)"
        return None

    def verify(self) -> bool:
        return self.problem() is None

    def current(self) -> CallRecord:
        """This record under today's key recipe: the same call, re-keyed and its checksum renewed.
        `judgeloop_version` still names the judgeloop that made the call.

        Only for a record that verifies (check `problem()` first): renewing the checksum of an
        edited record would launder the edit.
        """
        if self.recipe == KEY_RECIPE:
            return self
        rekeyed = self.model_copy(update={"key": request_key(self.model, self.request), "recipe": KEY_RECIPE})
        return rekeyed.model_copy(update={"checksum": rekeyed.expected_checksum()})


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """One call as the pipeline made it: where (context), and what (the record).

    A plain dataclass, not a model: its parts are validated models already, and a stage builds
    one for every call, cache hits included.
    """

    context: CallContext
    record: CallRecord
    cache_hit: bool = False

    def current(self) -> RecordedCall:
        """The call with its record under today's key recipe (see CallRecord.current)."""
        if self.record.recipe == KEY_RECIPE:
            return self
        return replace(self, record=self.record.current())


@dataclass(frozen=True, slots=True)
class ServedCall:
    """A call a session served, held light: where, under which key, whether a hit. Its record (a
    20 kB prompt, say) is read back when asked for (LLMSession.calls), so that a stage of a
    million calls does not hold every prompt it sent."""

    context: CallContext
    key: str
    cache_hit: bool = False
