"""Asking the backend for one call's reply, for a session (pipeline.llm.session): what a failed
answer becomes, counted in the session's statistics.

A reply that is empty or only whitespace is a failed call, whichever backend gave it: asked again
(EMPTY_REPLY_ATTEMPTS in all), counted, never stored or recorded.

A prompt too long for the model's context window (PromptTruncatedError from the backend) is, by
default (`llm.too_long: unscored`), recorded as that call's reply: a refusal with no text, done_reason
`prompt_too_long` and the backend's words in its meta, logged with the item it belongs to. The
judges read it as a failure of kind `too_long` (no re-ask: a re-ask is longer still), so the item
is recorded unscored with the reason and counted, the stage goes on, and a replay takes the same
course. A refusal is no transport error: the same prompt never fits the same model and window, both
in its key. (An OpenAI-compatible server's context is not in the key: after serving the model with
a longer one, run with JUDGELOOP_CACHE_MODE=refresh.) `llm.too_long: fail` stops the stage at the
first such prompt instead, naming the item.

A live call on another llama.cpp build than the pinned one is said once per session
(pipeline.llm.llama_pin).
"""

from __future__ import annotations

import logging
import threading

from pipeline.errors import EmptyReplyError, PromptTruncatedError, UnreadableReplyError
from pipeline.llm.llama_pin import foreign_build
from pipeline.llm.run_summary import RunStats
from pipeline.llm.settings import TooLong
from pipeline.llm.terminal import shown
from pipeline.llm.types import Backend, CallContext, ChatReply, ChatRequest

__all__ = ["EMPTY_REPLY_ATTEMPTS", "ModelAsker"]

log = logging.getLogger(__name__)

# How many times a call whose reply is empty (or only whitespace) is asked in all, for a backend
# that returns one rather than raising EmptyReplyError itself (the HTTP backends retry within
# llm.max_retries): a sampling model may answer the next time; a greedy one never will.
EMPTY_REPLY_ATTEMPTS = 3


class ModelAsker:
    """One session's asking of its backend: `answer` a call, `check_build` of its reply; the
    failures counted in the session's `stats`, under the session's lock."""

    def __init__(self, *, stage: str, too_long: TooLong, lock: threading.Lock, stats: RunStats) -> None:
        self.stage, self.too_long = stage, too_long
        self._lock, self.stats = lock, stats
        self._build_said = False  # a live call on another llama.cpp build is reported once

    def check_build(self, reply: ChatReply) -> None:
        """Say once per run when a live call ran on another llama.cpp build than the pinned one:
        its replies may differ from the recordings' under the same key (pipeline.llm.llama_pin)."""
        if self._build_said:
            return
        differs = foreign_build(reply.meta)
        if differs is not None:
            self._build_said = True
            log.warning(
                "stage %s: this live call ran on another llama.cpp build than the pinned one: %s. Its "
                "replies may differ from the committed recordings' under the same keys (a new measurement, "
                "not a rerun); `make install` in a new environment installs the pinned build.",
                self.stage,
                differs,
            )

    def answer(self, backend: Backend, request: ChatRequest, context: CallContext) -> ChatReply:
        """The backend's reply. One that is empty or only whitespace is a failed call, whichever
        backend gave it: asked again (EMPTY_REPLY_ATTEMPTS in all), counted, never stored or
        recorded; EmptyReplyError when no attempt gave text."""
        for attempt in range(1, EMPTY_REPLY_ATTEMPTS + 1):
            try:
                reply = backend.chat(request)
            except PromptTruncatedError as exc:
                return self._refused(exc, context)
            except UnreadableReplyError:
                self._count_unreadable()
                raise
            except EmptyReplyError:
                self._count_empty()
                raise
            if reply.text.strip() or reply.too_long is not None:
                return reply
            self._count_empty()
            where = shown(context.describe(), one_line=True)  # an item id comes from a data file
            log.warning("%s: the model's reply was empty (attempt %d)", where, attempt)
        raise EmptyReplyError(
            f"{context.describe()}: the model's reply was empty (or only whitespace) {EMPTY_REPLY_ATTEMPTS} "
            "times: a failed call, stored nowhere. Fix: check the model and its prompt (a greedy model "
            "answers the same every time); the stage resumes from the cache when run again."
        )

    def _count_empty(self) -> None:
        with self._lock:
            self.stats.empty_replies += 1

    def _count_unreadable(self) -> None:
        with self._lock:
            self.stats.unreadable_replies += 1

    def _refused(self, exc: PromptTruncatedError, context: CallContext) -> ChatReply:
        """A prompt too long for the context window: llm.too_long says whether that stops the
        stage, naming the item, or is recorded as this call's reply, a refusal without text, so
        the item is recorded unscored with the reason and a replay takes the same course."""
        said = exc.message.rstrip(". ") + "."
        if self.too_long == "fail":
            raise PromptTruncatedError(
                f"{context.describe()}: {said} The stage stopped at it (llm.too_long: fail); with "
                "llm.too_long: unscored such an item is recorded unscored, counted, and the others go on.",
                item=context.item,
            ) from exc
        log.warning("%s: %s Recorded unscored (llm.too_long: unscored).", context.describe(), said)
        return ChatReply.refused_as_too_long(exc.message)
