"""What the HTTP backends share: how a failed call becomes a judgeloop error, and how it is retried.

    status / failure                              error                   retried
    400 413 422 (other 4xx)                       BadRequestError         no
    401 403                                       BackendError            no
    404                                           ModelNotFoundError      no
    408 429 502 503 504, refused/reset, timeout,  TransientBackendError   up to llm.max_retries
      dropped connection, 200 carrying "error"
    500 (other 5xx)                               ServerFaultError        also at most llm.max_server_errors

A 500 gets its own, smaller budget: it is as often a request the server will never accept (a bad
`format`, a wrongly typed option) as a crashed runner, and retrying the former five times with
backoff only delays the real error message.

Backoff is exponential with jitter; a Retry-After header on a retried status is a floor for the
next wait (capped at MAX_RETRY_AFTER_S), so a rate-limited server is not asked again too soon.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

import httpx
import orjson
from tenacity import RetryCallState, Retrying, retry_if_exception_type, wait_random_exponential

from pipeline.errors import (
    BackendError,
    BadRequestError,
    ConfigError,
    ModelNotFoundError,
    TransientBackendError,
)
from pipeline.llm.settings import LLMSettings, in_flight

log = logging.getLogger(__name__)

T = TypeVar("T")
# Seconds to wait before the next attempt; tenacity's wait strategies fit, and so does any callable.
Wait = Callable[[RetryCallState], float]
_RETRYABLE_STATUS = frozenset({408, 429, 502, 503, 504})
# A server may ask for longer than a run should silently stall; past this, our own budget rules.
MAX_RETRY_AFTER_S = 120.0


class ServerFaultError(TransientBackendError):
    """A 500 from the server: retried, but only llm.max_server_errors times."""


def default_wait() -> Wait:
    # Jitter keeps many worker threads that failed together from retrying in lockstep.
    return wait_random_exponential(multiplier=0.5, max=30)


def make_client(settings: LLMSettings, transport: httpx.BaseTransport | None) -> httpx.Client:
    # Connecting should be instant, but a reply may wait minutes for a model to load. Pool waits
    # cannot happen: callers hold the backend's semaphore, sized like the pool, before they send.
    connections = in_flight(settings.parallelism)
    timeout = httpx.Timeout(
        connect=settings.connect_timeout_s,
        read=settings.read_timeout_s,
        write=settings.read_timeout_s,
        pool=None,
    )
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    return httpx.Client(base_url=settings.base_url, timeout=timeout, limits=limits, transport=transport)


def json_body(response: httpx.Response) -> Any:
    """The reply's body as JSON; ValueError if it is not. orjson first: a reply with
    log-probabilities is tens of kB, which the json module reads about twice as slowly; the json
    module then reads what orjson refuses (NaN, a lone surrogate)."""
    try:
        return orjson.loads(response.content)
    except orjson.JSONDecodeError:
        return json.loads(response.text)


def error_text(response: httpx.Response) -> str:
    """The server's own words: Ollama says {"error": "..."}, OpenAI {"error": {"message": ...}}."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:500] or response.reason_phrase
    return body_error(body) or response.text.strip()[:500]


def body_error(body: Any) -> str | None:
    if not isinstance(body, dict) or "error" not in body:
        return None
    err = body["error"]
    if isinstance(err, dict):
        return str(err.get("message") or err)
    return str(err)


def send(client: httpx.Client, method: str, path: str, *, json: Any = None) -> httpx.Response:
    """One HTTP exchange, with every transport failure turned into a judgeloop error."""
    where = f"{method} {client.base_url.join(path)}"
    try:
        return client.request(method, path, json=json)
    except httpx.ConnectTimeout as exc:
        raise TransientBackendError(
            f"{where}: no connection within {client.timeout.connect}s (llm.connect_timeout_s)"
        ) from exc
    except httpx.ReadTimeout as exc:
        raise TransientBackendError(
            f"{where}: no reply within {client.timeout.read}s. A cold model load can take minutes: "
            "if the server is just slow, raise llm.read_timeout_s"
        ) from exc
    except httpx.ConnectError as exc:
        raise TransientBackendError(
            f"{where}: cannot connect ({exc}). Is the server running at {client.base_url}?"
        ) from exc
    except (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError) as exc:
        raise TransientBackendError(f"{where}: connection lost ({type(exc).__name__}: {exc})") from exc
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        raise ConfigError(f"llm.base_url {str(client.base_url)!r} is not a usable URL: {exc}") from exc


def check_status(response: httpx.Response, *, not_found: str) -> None:
    """Raise the error a non-2xx reply stands for; `not_found` is what to tell the user on a 404."""
    status = response.status_code
    if status < 300:
        return
    where = f"{response.request.method} {response.request.url}"
    said = error_text(response)
    if status == 404:
        raise ModelNotFoundError(f"{not_found} (server said: {said})")
    if status in (401, 403):
        raise BackendError(f"{where}: HTTP {status}, the server refused the credentials: {said}")
    if status in _RETRYABLE_STATUS:
        delay = retry_after(response.headers.get("Retry-After"))
        asked = f" (Retry-After: {delay:.0f}s)" if delay is not None else ""
        raise TransientBackendError(f"{where}: HTTP {status}: {said}{asked}", retry_after=delay)
    if status >= 500:
        raise ServerFaultError(f"{where}: HTTP {status}: {said}")
    raise BadRequestError(f"{where}: HTTP {status}, the server rejected the request: {said}")


def retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date), capped at MAX_RETRY_AFTER_S;
    None when absent or unreadable."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int
    max_server_errors: int
    wait: Wait = field(default_factory=default_wait)
    sleep: Callable[[float], None] = time.sleep  # tests record the waits instead of sleeping

    @classmethod
    def from_settings(cls, settings: LLMSettings, wait: Wait | None = None) -> RetryPolicy:
        return cls(settings.max_retries, settings.max_server_errors, wait or default_wait())

    def call(self, attempt: Callable[[], T], what: str) -> T:
        """Run `attempt` until it succeeds, retrying only TransientBackendError within budget.

        The last error is re-raised as itself (same class, so callers can still tell a 503 from a
        404), with how many attempts were made appended to its message.
        """
        attempts = 0
        server_errors = 0

        def counted() -> T:
            nonlocal attempts
            attempts += 1
            return attempt()

        def give_up(state: RetryCallState) -> bool:
            nonlocal server_errors
            if state.outcome is not None and isinstance(state.outcome.exception(), ServerFaultError):
                server_errors += 1
                if server_errors > self.max_server_errors:
                    return True
            return state.attempt_number > self.max_retries

        def announce(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome is not None else None
            delay = state.next_action.sleep if state.next_action is not None else 0.0
            log.warning("%s: attempt %d failed (%s); retrying in %.1fs", what, attempts, exc, delay)

        def wait(state: RetryCallState) -> float:
            # The server's Retry-After is a floor: our backoff may wait longer, never shorter.
            exc = state.outcome.exception() if state.outcome is not None else None
            asked = getattr(exc, "retry_after", None)
            return max(self.wait(state), asked or 0.0)

        retrying = Retrying(
            retry=retry_if_exception_type(TransientBackendError),
            stop=give_up,
            wait=wait,
            sleep=self.sleep,
            before_sleep=announce,
            reraise=True,
        )
        try:
            return retrying(counted)
        except TransientBackendError as exc:
            budget = f"llm.max_retries={self.max_retries}"
            if isinstance(exc, ServerFaultError):
                budget += f", llm.max_server_errors={self.max_server_errors}"
            plural = "s" if attempts != 1 else ""
            raise type(exc)(f"{exc.message} — gave up after {attempts} attempt{plural} ({budget})") from exc
