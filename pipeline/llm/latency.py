"""How long a call took, as measured when it was made, read back from its recorded reply.

A backend that times its own work says so in the reply's meta (Ollama: `total_duration` and its
parts, in ns). For any other backend the session adds `wall_ns`, the wall time of the live call
(pipeline.llm.session), outside the cache key like all of meta. A cache hit or a replay reads the
duration the call had when it was made, so a decision taken on durations (a latency budget) is
taken the same way on any machine, offline.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from pipeline.llm.records import RecordedCall
from pipeline.llm.types import CallContext, ChatReply, ChatRequest

BACKEND_TOTAL = "total_duration"  # Ollama's own, ns
WALL = "wall_ns"  # the session's stopwatch around a live call, ns


def call_seconds(reply: ChatReply) -> float | None:
    """The call's duration in seconds: the backend's own total, else the measured wall time; None
    for a call recorded before durations were kept."""
    for name in (BACKEND_TOTAL, WALL):
        value = reply.meta.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value / 1e9
    return None


def total_seconds(durations: Iterable[float | None]) -> float | None:
    """The sum, or None when any part is unknown (an unknown part is never counted as zero)."""
    total = 0.0
    for seconds in durations:
        if seconds is None:
            return None
        total += seconds
    return total


class _Session(Protocol):
    def chat(self, request: ChatRequest, context: CallContext) -> RecordedCall: ...


class TimedCalls:
    """A session seen through a log: each call is forwarded, and its key and duration kept, so a
    caller that makes several calls through a helper (a re-asking judge) knows what each cost.
    One per item and thread."""

    def __init__(self, session: _Session) -> None:
        self.session = session
        self.keys: list[str] = []
        self.seconds: list[float | None] = []

    def chat(self, request: ChatRequest, context: CallContext) -> RecordedCall:
        call = self.session.chat(request, context)
        self.keys.append(call.record.key)
        self.seconds.append(call_seconds(call.record.reply))
        return call

    def take(self) -> tuple[tuple[str, ...], tuple[float | None, ...]]:
        """The calls logged since the last take, and a fresh log."""
        taken = tuple(self.keys), tuple(self.seconds)
        self.keys, self.seconds = [], []
        return taken
