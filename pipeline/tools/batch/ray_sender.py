"""The Ray runner's workers: each reads a stretch of requests.jsonl itself and sends its requests
to the OpenAI-compatible endpoint, several at once, handing back only the answers.

Why not ray.data.llm's HTTP request processor (the runner's first form): it sends a batch's rows
one after another over a new connection each, and a request's body travels through Ray's Arrow
blocks, whose schemas merge across rows (a field one body lacks comes back as null), so each row
had to be a batch of its own; and `ray.data.read_text` reads the whole file into one worker's
memory. At 2,000 calls that was 12 calls/s, and a million 20 kB requests would not fit.

Here the dataset is the file's stretches (byte ranges that start and end at line starts, a few MB
each); a worker (`RequestSender`, a Ray actor) reads its stretch line by line, sends each line's
body as exported (`in_flight` at a time over kept-alive connections), and yields the answers as
they come (not in the file's order) as rows of four strings: custom_id, HTTP status, the reply's
text, and why there is none. A request body never passes through Ray; an answer is a few hundred
bytes. The file must be readable at the same path by every worker (on a cluster: a shared file
system), as it had to be for read_text.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import httpx
import orjson

from pipeline.llm.files import open_regular

# Answers a worker hands back at once (a Ray block): small, so that the results file grows as the
# answers come, and a batch's answers are a few hundred kB.
ANSWERS_PER_BLOCK = 64
# As ray.data.llm's HTTP processor did: what a server says when it is busy or a proxy timed out.
RETRYABLE = frozenset({408, 429, 502, 503, 504})
MIN_STRETCH_BYTES = 1 << 20
MAX_STRETCH_BYTES = 16 << 20


def stretches(path: Path, workers: int) -> list[tuple[int, int]]:
    """[start, end) byte ranges covering the file, each starting at a line's start: about four per
    worker (so that a slow stretch does not leave the others idle at the end), 1-16 MB each."""
    ranges: list[tuple[int, int]] = []
    start = 0
    with open_regular(path) as handle:  # never a pipe put there waited on; its size, the file's read
        size = os.fstat(handle.fileno()).st_size
        target = min(MAX_STRETCH_BYTES, max(MIN_STRETCH_BYTES, size // (4 * max(1, workers)) + 1))
        while start < size:
            end = size
            if start + target < size:
                handle.seek(start + target)
                handle.readline()  # on to the next line's start
                end = handle.tell()
            ranges.append((start, end))
            start = end
    return ranges


def _lines(path: str, start: int, end: int) -> Iterator[tuple[int, bytes]]:
    """(byte offset, line) of every non-blank line in [start, end)."""
    with open_regular(Path(path)) as handle:
        handle.seek(start)
        offset = start
        while offset < end:
            raw = handle.readline()
            if not raw:
                return
            if raw.strip():
                yield offset, raw
            offset += len(raw)


class RequestSender:
    """A Ray Data worker (a callable class: one per actor, its client kept across batches)."""

    def __init__(
        self,
        path: str,
        url: str,
        headers: dict[str, str],
        in_flight: int,
        max_retries: int,
        retry_wait_s: float,
        timeout_s: float,
    ) -> None:
        self.path, self.url, self.max_retries, self.retry_wait_s = path, url, max_retries, retry_wait_s
        self.headers = {"Content-Type": "application/json", **headers}
        self.in_flight = max(1, in_flight)
        self.timeout = httpx.Timeout(timeout_s, connect=30.0)
        # A client (and its one kept-alive connection) for each of the pool's threads, used by that
        # thread alone. Shared, httpcore 1.0.9's pool checks each idle connection in any thread's
        # pass (has_expired: "idle, and readable?" without the connection's lock): a thread
        # paused between the two (preempted, or running a cyclic GC's finalizers, which let other
        # threads run) finds readable the connection another thread was given meanwhile and has
        # sent on (its reply arriving), and closes it under that request: EBADF on its read, or
        # its poll() never woken until the read timeout (encode/httpcore#1110 is the same race).
        self._local = threading.local()
        self._clients: list[httpx.Client] = []
        self._clients_lock = threading.Lock()
        self.pool = ThreadPoolExecutor(self.in_flight)

    def make_client(self) -> httpx.Client:
        """A worker thread's own client: one connection, kept alive."""
        return httpx.Client(
            timeout=self.timeout, limits=httpx.Limits(max_connections=1, max_keepalive_connections=1)
        )

    def _client(self) -> httpx.Client:
        client: httpx.Client | None = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = self.make_client()
            with self._clients_lock:
                self._clients.append(client)
        return client

    def close(self) -> None:
        """Close every thread's client (the threads are left to end: Ray ends an actor so)."""
        with self._clients_lock:
            clients, self._clients = self._clients, []
        for client in clients:
            client.close()

    def __call__(self, batch: dict[str, Any]) -> Iterator[dict[str, list[str]]]:
        """Every stretch of the batch (start and end columns) answered, a block at a time."""
        answers: list[tuple[str, str, str, str]] = []
        for start, end in zip(batch["start"], batch["end"], strict=True):
            for answer in self._answered(int(start), int(end)):
                answers.append(answer)
                if len(answers) >= ANSWERS_PER_BLOCK:
                    yield _block(answers)
                    answers = []
        if answers:
            yield _block(answers)

    def _answered(self, start: int, end: int) -> Iterator[tuple[str, str, str, str]]:
        """The stretch's answers as they come, with up to `in_flight` requests out at once and no
        more read ahead than twice that (memory stays a few requests, whatever the file). Not in
        the file's order: in order, one slow request (a long reply, a connection waiting in the
        server's accept queue, a retry's wait) held up the whole stretch once the others ahead of
        it were answered, and the worker's other connections went idle until it came back. A
        results file's lines are found by custom_id, in any order (as OpenAI's Batch API writes them)."""
        pending: set[Future[tuple[str, str, str, str]]] = set()
        for offset, raw in _lines(self.path, start, end):
            if len(pending) >= 2 * self.in_flight:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                yield from (future.result() for future in done)
            pending.add(self.pool.submit(self._send, offset, raw))
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            yield from (future.result() for future in done)

    def _send(self, offset: int, raw: bytes) -> tuple[str, str, str, str]:
        """(custom_id, status, reply text, why no reply) of one requests.jsonl line."""
        try:
            entry = orjson.loads(raw)
            key, body = entry["custom_id"], entry["body"]
            if not isinstance(key, str):
                raise TypeError("custom_id is not a string")
            # export wrote it with orjson: the same bytes as exported (a body nested past orjson's
            # 255 levels, which it reads to 1,024, is no request: JSONEncodeError, a TypeError)
            content = orjson.dumps(body)
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(
                f"{self.path}: the line at byte {offset} is not a batch request ({exc}). Fix: export again."
            ) from exc
        problem = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(self.retry_wait_s * 2 ** (attempt - 1))
            try:
                response = self._client().post(self.url, content=content, headers=self.headers)
            except httpx.HTTPError as exc:  # a transport failure: the connection, a timeout
                problem = f"{type(exc).__name__}: {exc}"
                continue
            if response.status_code in RETRYABLE:
                problem = f"HTTP {response.status_code}"
                continue
            return key, str(response.status_code), response.text, ""
        return key, "", "", f"no answer after {self.max_retries + 1} tries (last: {problem})"

    def __del__(self) -> None:  # Ray ends an actor without a call of ours: its threads and sockets go
        if (pool := getattr(self, "pool", None)) is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        if getattr(self, "_clients", None) is not None:
            self.close()


def _block(answers: list[tuple[str, str, str, str]]) -> dict[str, list[str]]:
    keys, statuses, replies, problems = zip(*answers, strict=True)
    columns = {"custom_id": keys, "status": statuses, "reply": replies, "problem": problems}
    return {name: list(column) for name, column in columns.items()}
