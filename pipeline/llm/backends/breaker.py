"""One circuit breaker per server: a dead server fails the stage within one retry budget.

A stage keeps several calls at a server at once (pipeline.llm.settings.in_flight), and each retried
a failed attempt on its own (pipeline.llm.backends.http_errors.RetryPolicy): against a server that
was down, every one of them spent the whole budget before giving up, and the items behind them each
another, so a stage of eight workers took about nine budgets to fail (issue 25).

The breaker makes the budget the server's, not each call's:

    closed   calls go out as usual
    probing  a call met a connection fault (refused, reset, timed out, dropped:
             ConnectionFaultError); that call, the probe, retries on its budget as before, while
             every other call to the server waits before its next attempt instead of retrying too
    closed   again as soon as any call gets an answer (the probe's retry, or a reply in flight):
             the waiting calls go on at once
    open     the probe used up its budget: every call to the server fails at once with
             ServerDownError, naming the server and the fix, and so does every later one

So a dead server costs one retry budget, whatever the number of workers, and a server that is
back within that budget costs the outage and nothing else. Only connection faults count: a 429 or
a 503 is a live server asking for patience (its retries follow its Retry-After), a 500 a request it
refuses, a 200 without content a server that answered. Once open, the breaker stays open for the
life of its backend: the stage fails, and its rerun (every finished call is in the cache) starts
with a closed one.
"""

from __future__ import annotations

import threading

from pipeline.errors import ServerDownError
from pipeline.llm.redact import redact_url


class CircuitBreaker:
    """The breaker of one server (its base URL); thread-safe, shared by every call to it. A call
    is named by any object that stands for it (its retry budget)."""

    def __init__(self, server: str) -> None:
        self.server = redact_url(server)
        self._changed = threading.Condition()
        self._probe: object | None = None
        self._error: ServerDownError | None = None
        self._open = threading.Event()

    @property
    def is_open(self) -> bool:
        return self._open.is_set()

    def before_attempt(self, call: object) -> None:
        """Wait while another call probes the server; ServerDownError once the breaker is open."""
        with self._changed:
            while self._probe is not None and self._probe is not call and self._error is None:
                self._changed.wait()
            if self._error is not None:
                raise ServerDownError(
                    f"{self._error.message} (This call was stopped before it was sent: the server is down.)"
                )

    def fault(self, call: object) -> None:
        """`call`'s attempt met a connection fault: it probes the server unless another call does."""
        with self._changed:
            if self._probe is None and self._error is None:
                self._probe = call

    def answered(self) -> None:
        """An attempt got an answer from the server (any answer): the server is up."""
        with self._changed:
            if self._probe is not None:
                self._probe = None
                self._changed.notify_all()

    def release(self, call: object) -> None:
        """`call` is over, however it ended: if it was probing, the others go on."""
        with self._changed:
            if self._probe is call:
                self._probe = None
                self._changed.notify_all()

    def trip(self, last_error: str, gave_up: str, seconds: float, *, stuck: bool) -> ServerDownError:
        """Open the breaker after a call used up its budget on connection faults; the error for
        that call. `stuck`: the server took the connections but never answered (read timeouts)."""
        fix = (
            "check the server: it takes connections but does not answer (a stuck runner; or a model "
            "still loading, then raise llm.read_timeout_s)"
            if stuck
            else "start the server (for Ollama: `ollama serve`), or point llm.base_url (or "
            "JUDGELOOP_BASE_URL) at one that runs"
        )
        with self._changed:
            if self._error is None:
                self._error = ServerDownError(
                    f"the server at {self.server} is {'stuck' if stuck else 'down'}: {last_error} — "
                    f"{gave_up} over {seconds:.1f}s, so every call to it stops now. Fix: {fix}; then "
                    "run the stage again: every call that finished is in the cache and is not repeated."
                )
                self._open.set()
            self._probe = None
            self._changed.notify_all()
            return self._error

    def wait(self, seconds: float) -> None:
        """Sleep for a retry's backoff, cut short if the breaker opens meanwhile."""
        self._open.wait(seconds)
