"""What the HTTP backends share: how a failed call becomes a judgeloop error, and how it is retried.

    status / failure                              error                   retried
    400 413 422 (other 4xx)                       BadRequestError         no
    401 403                                       BackendError            no
    404                                           ModelNotFoundError      no
    408 429 502 503 504, 200 carrying "error"     TransientBackendError   up to llm.max_retries
    refused/reset, connect timeout, dropped       ConnectionFaultError    up to llm.max_retries, then the
                                                                          server's breaker opens
    read timeout (no reply in llm.read_timeout_s) ConnectionFaultError    also at most llm.max_server_errors
    500 (other 5xx)                               ServerFaultError        also at most llm.max_server_errors

A 500 gets its own, smaller budget: it is as often a request the server will never accept (a bad
`format`, a wrongly typed option) as a crashed runner, and retrying the former five times with
backoff only delays the real error message. A read timeout shares it: each costs a whole
llm.read_timeout_s (five minutes by default), and a server that answered nothing within it twice
rarely does a third time.

A call that uses up its retries on connection faults opens its server's circuit breaker
(pipeline.llm.backends.breaker): every other call to that server then stops at once, so a dead
server fails a stage within one retry budget, not one per worker.

What the user sees of the retries is one line per server per fault, not one per retry
(pipeline.llm.backends.retry_notices); each retry is logged at DEBUG.

Backoff is exponential with jitter; a Retry-After header on a retried status is a floor for the
next wait (capped at MAX_RETRY_AFTER_S), so a rate-limited server is not asked again too soon.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import ssl
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit, urlunsplit
from urllib.request import getproxies

import httpx
import orjson
from tenacity import RetryCallState, Retrying, retry_if_exception_type, wait_random_exponential

from pipeline.errors import (
    BackendError,
    BadRequestError,
    ConfigError,
    ConnectionFaultError,
    EmptyReplyError,
    ModelNotFoundError,
    TransientBackendError,
    UnreadableReplyError,
)
from pipeline.llm.backends.breaker import CircuitBreaker
from pipeline.llm.backends.retry_notices import RetryNotices
from pipeline.llm.bounds import depth_problem, surrogate_problem
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


class ReadTimeoutError(ConnectionFaultError):
    """No reply within llm.read_timeout_s: retried, but only llm.max_server_errors times."""


# The failures that share the smaller budget of llm.max_server_errors.
_SCARCE = (ServerFaultError, ReadTimeoutError)


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
    # A token in the base URL's query (a proxy's ?api_key=...) goes with every request: httpx would
    # otherwise drop the path when it joins one to a base URL with a query.
    base, query = without_query(settings.base_url)
    if transport is None and urlsplit(base).scheme == "http" and not getproxies():
        transport = plain_http_transport(limits)
    return httpx.Client(
        base_url=base, params=httpx.QueryParams(query), timeout=timeout, limits=limits, transport=transport
    )


def plain_http_transport(limits: httpx.Limits) -> httpx.HTTPTransport:
    """httpx's own transport for a plain-HTTP server, less the certificate store httpx loads for
    every client (certifi's, about 40 ms of CPU at each stage's first request: bench/stage_head.py),
    which no http:// request reads. Its TLS context trusts no certificate, so a TLS connection
    through it fails rather than goes unverified. Only without a proxy in the environment: httpx
    reads the environment's proxies only for a client it makes the transport of, so with one
    the client is made as before."""
    return httpx.HTTPTransport(verify=ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), limits=limits)


def without_query(url: str) -> tuple[str, str]:
    """The URL without its query string, and the query string."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")), parts.query


def json_body(response: httpx.Response) -> Any:
    """The reply's body as JSON; ValueError if it is not. orjson first: a reply with
    log-probabilities is tens of kB, which the json module reads about twice as slowly; the json
    module then reads what orjson refuses (NaN, a lone surrogate)."""
    try:
        return orjson.loads(response.content)
    except orjson.JSONDecodeError:
        return json_loads(response.text)


def json_loads(text: str) -> Any:
    """The json module's reading of `text`; ValueError, as for any text that is not JSON, where it is
    nested past the parser's depth (the json module's RecursionError: a server's reply nested past
    orjson's 1,024 levels gave a traceback, not a failed call)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deep to read") from None


@contextlib.contextmanager
def shaped_reply(where: str) -> Iterator[None]:
    """EmptyReplyError for a reply whose values are of another shape than the protocol's (a count
    that is text, a logprob that is a list: the ValueError that ChatReply's validation or the
    logprobs' reader raises): a protocol error, retried like a dropped connection, not a traceback."""
    try:
        yield
    except ValueError as exc:
        said = "; ".join(line.strip() for line in str(exc).splitlines()[:3])[:200] or type(exc).__name__
        raise EmptyReplyError(
            f"{where}: a reply of another shape ({said}): a protocol error, not an answer"
        ) from exc


def refuse_unreadable(body: Any, where: str) -> None:
    """UnreadableReplyError for a reply's body holding a lone surrogate, which the json module
    reads from an escape ("\\ud800") where orjson refuses it: a failed call, retried like an empty
    reply, since no cache row or recording line can hold it (and a record of it could not be made)."""
    if (problem := surrogate_problem(body)) is not None:
        raise UnreadableReplyError(f"{where}: the reply holds {problem}: a failed call, not an answer")


def refuse_unrecordable(body: Any, where: str) -> None:
    """refuse_unreadable, for a reply that becomes a record, and UnreadableReplyError for one nested
    past bounds.MAX_DEPTH (orjson reads 1,024 levels; a record of 300 failed to serialize, a
    traceback) or holding an integer past 64 bits (past_64_bits): a failed call, retried, stored
    nowhere."""
    refuse_unreadable(body, where)
    if (deep := depth_problem(body)) is not None:
        raise UnreadableReplyError(f"{where}: the reply is {deep}: a failed call, not an answer")
    if (number := past_64_bits(body)) is not None:
        raise UnreadableReplyError(
            f"{where}: the reply holds the integer {str(number)[:40]}, past 64 bits, which no record can "
            "hold (its recording would not read back): a failed call, not an answer"
        )


_LONG_DIGITS = re.compile(rb"[0-9]{19,}")  # 2**63 has 19 digits: a shorter run is within 64 bits


def past_64_bits(body: Any) -> int | None:
    """The first integer in `body` (parsed JSON) outside a signed 64-bit integer's range, or None.
    Such a value is read by the json module, but a record holding it is written as a number that
    orjson and pydantic then refuse to read back (a count), or read back as another value (a value
    of `meta`: the checksum fails). Iterative; a body orjson writes with no run of 19 digits holds none."""
    try:
        if _LONG_DIGITS.search(orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS)) is None:
            return None
    except orjson.JSONEncodeError:
        pass  # an integer past orjson's range among them: walked below
    stack = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, int) and not isinstance(node, bool) and not -(2**63) <= node < 2**63:
            return node
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return None


def error_text(response: httpx.Response) -> str:
    """The server's own words: Ollama says {"error": "..."}, OpenAI {"error": {"message": ...}}."""
    try:
        body = json_loads(response.text)
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
        raise ConnectionFaultError(
            f"{where}: no connection within {client.timeout.connect}s (llm.connect_timeout_s)"
        ) from exc
    except httpx.ReadTimeout as exc:
        raise ReadTimeoutError(
            f"{where}: no reply within {client.timeout.read}s. A cold model load can take minutes: "
            "if the server is just slow, raise llm.read_timeout_s"
        ) from exc
    except httpx.ConnectError as exc:
        raise ConnectionFaultError(
            f"{where}: cannot connect ({exc}). Is the server running at {client.base_url}?"
        ) from exc
    except (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError) as exc:
        raise ConnectionFaultError(f"{where}: connection lost ({type(exc).__name__}: {exc})") from exc
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
    """How calls to one server are retried. `breaker`: the server's circuit breaker, shared by
    every call made through this policy (one policy a backend, one backend a server); `notices`,
    the server's retry lines (without: a line per retry)."""

    max_retries: int
    max_server_errors: int
    wait: Wait = field(default_factory=default_wait)
    sleep: Callable[[float], None] = time.sleep  # tests record the waits instead of sleeping
    breaker: CircuitBreaker | None = None
    notices: RetryNotices | None = None

    @classmethod
    def from_settings(cls, settings: LLMSettings, wait: Wait | None = None) -> RetryPolicy:
        return cls(
            settings.max_retries,
            settings.max_server_errors,
            wait or default_wait(),
            breaker=CircuitBreaker(settings.base_url),
            notices=RetryNotices(settings.base_url),
        )

    def _pause(self, seconds: float) -> None:
        # A backoff is cut short when another call opens the breaker; a test's own sleep is kept.
        if self.breaker is not None and self.sleep is time.sleep:
            self.breaker.wait(seconds)
        else:
            self.sleep(seconds)

    def call(self, attempt: Callable[[], T], what: str) -> T:
        """Run `attempt` until it succeeds, retrying only TransientBackendError within budget.

        The last error is re-raised as itself (same class, so callers can still tell a 503 from a
        404), with how many attempts were made appended to its message; a call that gave up on
        connection faults opens the breaker and raises ServerDownError, as does every call to the
        same server after it (before an attempt, or at the end of a wait).
        """
        budget: _Budget[T] = _Budget(self, attempt)
        retrying = Retrying(
            retry=retry_if_exception_type(TransientBackendError),
            stop=budget.give_up,
            wait=budget.wait,
            sleep=self._pause,
            before_sleep=lambda state: budget.announce(state, what),
            reraise=True,
        )
        try:
            return retrying(budget.attempt)
        except TransientBackendError as exc:
            raise budget.final_error(exc) from exc
        finally:
            if self.breaker is not None:
                self.breaker.release(budget)


class _Budget(Generic[T]):
    """One call's attempts against a RetryPolicy's budget (tenacity's stop, wait and attempt)."""

    def __init__(self, policy: RetryPolicy, attempt: Callable[[], T]) -> None:
        self.policy, self._attempt = policy, attempt
        self.attempts = 0
        self.scarce = 0  # 500s and read timeouts so far
        self.started = time.monotonic()

    def attempt(self) -> T:
        result = self._attempt_through_breaker()
        if self.policy.notices is not None:
            self.policy.notices.answered()
        return result

    def _attempt_through_breaker(self) -> T:
        breaker = self.policy.breaker
        if breaker is None:
            self.attempts += 1
            return self._attempt()
        breaker.before_attempt(self)
        self.attempts += 1
        try:
            result = self._attempt()
        except ConnectionFaultError:
            breaker.fault(self)
            raise
        except Exception:
            breaker.answered()  # an error the server sent: it is up
            raise
        breaker.answered()
        return result

    def give_up(self, state: RetryCallState) -> bool:
        if state.outcome is not None and isinstance(state.outcome.exception(), _SCARCE):
            self.scarce += 1
            if self.scarce > self.policy.max_server_errors:
                return True
        return state.attempt_number > self.policy.max_retries

    def wait(self, state: RetryCallState) -> float:
        # The server's Retry-After is a floor: our backoff may wait longer, never shorter.
        exc = state.outcome.exception() if state.outcome is not None else None
        asked = getattr(exc, "retry_after", None)
        return max(self.policy.wait(state), asked or 0.0)

    def announce(self, state: RetryCallState, what: str) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        delay = state.next_action.sleep if state.next_action is not None else 0.0
        notices = self.policy.notices
        if notices is None or not isinstance(exc, TransientBackendError):
            log.warning("%s: attempt %d failed (%s); retrying in %.1fs", what, self.attempts, exc, delay)
            return
        log.debug("%s: attempt %d failed (%s); retrying in %.1fs", what, self.attempts, exc, delay)
        notices.retrying(exc, self.attempts + 1, self.most_attempts(exc), delay)

    def most_attempts(self, exc: TransientBackendError) -> int:
        """The most attempts this call makes if every one from now fails as `exc` did (after
        give_up counted it): its budget, or fewer where 500s and read timeouts have their own."""
        left = self.policy.max_retries + 1 - self.attempts
        if isinstance(exc, _SCARCE):
            left = min(left, self.policy.max_server_errors - self.scarce + 1)
        return self.attempts + left

    def final_error(self, exc: TransientBackendError) -> BackendError:
        policy = self.policy
        if policy.notices is not None:
            policy.notices.gave_up()
        budget = f"llm.max_retries={policy.max_retries}"
        if isinstance(exc, _SCARCE):
            budget += f", llm.max_server_errors={policy.max_server_errors}"
        plural = "s" if self.attempts != 1 else ""
        gave_up = f"gave up after {self.attempts} attempt{plural} ({budget})"
        if isinstance(exc, ConnectionFaultError) and policy.breaker is not None:
            seconds = time.monotonic() - self.started
            stuck = isinstance(exc, ReadTimeoutError)
            return policy.breaker.trip(exc.message, gave_up, seconds, stuck=stuck)
        return type(exc)(f"{exc.message} — {gave_up}")
