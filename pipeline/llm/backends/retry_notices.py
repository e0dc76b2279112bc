"""What a user sees of one server's retries: one line when a fault starts, one when it ends.

A stage keeps several calls at a server at once, and each retries a failed attempt on its own
(pipeline.llm.backends.http_errors.RetryPolicy). Printed once per retry, a flaky server (a burst of
503s, a rate limit) gave a line per call per retry, and a dead one a line per retry of its probe: a
flood in which the one line that matters, the last, was easy to miss. So the retries of one server
are told as events. An event is a run of one fault (the same kind of error: connection refused, no
reply, HTTP 503, ...) at the server, from its first failed attempt to the first answer after it:

    server http://127.0.0.1:11434: HTTP 503: busy — retrying in 0.4s (attempt 2 of 6); further
        retries of this fault are counted, not shown
    ... (the other calls' retries, and the later ones of this call: counted)
    server http://127.0.0.1:11434: answering again after 9 failed attempts over 3.1s (HTTP 503: busy)

The closing line comes only when retries were left unshown. An event that ends in giving up closes
without a line of its own: the call's error is printed by the stage, and it is the final line (for a
dead server, the breaker's: pipeline.llm.backends.breaker). Another fault at the same server before
it answers (503s, then 500s) gets its own line, and the closing line counts both. Every retry is
still logged at DEBUG, one record each.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from pipeline.errors import TransientBackendError
from pipeline.llm.redact import redact_url

log = logging.getLogger(__name__)

# "POST http://host:port/api/chat: " before what went wrong: the line names the server already.
_WHERE = re.compile(r"^[A-Z]+ \S+: ")
_STATUS = re.compile(r"\bHTTP (\d{3})\b")


def fault_kind(exc: TransientBackendError) -> str:
    """What makes two failures the same fault: the error's class and, for an HTTP error, its status."""
    status = _STATUS.search(exc.message)
    return type(exc).__name__ + (f" {status.group(1)}" if status else "")


def fault_text(exc: TransientBackendError) -> str:
    return _WHERE.sub("", exc.message, count=1)


@dataclass
class _Event:
    """The faults since the server last answered: the one now, and each shown, in order."""

    kind: str
    texts: list[str]
    started: float
    failures: int = 1  # failed attempts since the server last answered, every call's


class RetryNotices:
    """The retry lines of one server; thread-safe, shared by every call to it (one per RetryPolicy)."""

    def __init__(self, server: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.server = redact_url(server)
        self._clock = clock
        self._lock = threading.Lock()
        self._event: _Event | None = None

    def retrying(self, exc: TransientBackendError, attempt: int, attempts: int, delay: float) -> None:
        """An attempt failed with `exc` and is retried in `delay` seconds as attempt `attempt` of
        at most `attempts`: a line if it starts a fault, counted otherwise."""
        kind, text = fault_kind(exc), fault_text(exc)
        with self._lock:
            event = self._event
            if event is None:
                self._event = _Event(kind, [text], self._clock())
            else:
                event.failures += 1
                if event.kind == kind:
                    return
                event.kind = kind
                event.texts.append(text)
        log.warning(
            "server %s: %s — retrying in %.1fs (attempt %d of %d); further retries of this fault are "
            "counted, not shown",
            self.server,
            text,
            delay,
            attempt,
            attempts,
        )

    def answered(self) -> None:
        """An attempt got its reply: the faults, if any, are over; their count, if any went unshown."""
        with self._lock:
            event, self._event = self._event, None
        if event is not None and event.failures > len(event.texts):
            log.warning(
                "server %s: answering again after %d failed attempts over %.1fs (%s)",
                self.server,
                event.failures,
                self._clock() - event.started,
                "; ".join(event.texts),
            )

    def gave_up(self) -> None:
        """A call used up its budget: its error, which the stage prints, is the event's last line."""
        with self._lock:
            self._event = None
