"""The fake servers' one base: real HTTP on 127.0.0.1, at a port the system picks, that records
every request it is sent.

A fake server (FakeOllama, FakeOpenAI) is a LoopbackServer with a LoopbackHandler of its own: the
server holds the knobs and the counters, the handler routes a request and writes the reply in the
protocol's shapes. What they share lives here once: starting and stopping (a context manager, each
request on its own thread), the request as received, and writing a reply with its length.

    with FakeOpenAI() as server:           # any LoopbackServer
        ... server.url ...
        server.received[-1].body, server.requests_total
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Generic, Self, TypeVar, cast
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]  # names lowercased
    body: Any  # parsed JSON; the raw text when it was not JSON; None when empty


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # a hanging handler must not hold up close()
    # The listen backlog: socketserver's 5 dropped the connects of a client opening more at once
    # (the Ray runner opens `concurrency` of them, 32 or more): each dropped SYN cost a second, and
    # at 128 some connections were reset. Real servers take many (uvicorn 2048).
    request_queue_size = 1024
    fake: LoopbackServer

    def get_request(self) -> tuple[socket.socket, Any]:
        connection, address = super().get_request()
        self.fake.connected(connection)
        return connection, address


class LoopbackServer:
    """Started by `start()` or `with`; `handler` serves each request. `_cond` guards the counters,
    for a subclass's own counters too."""

    handler: ClassVar[type[BaseHTTPRequestHandler]]

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._received: list[Received] = []
        self.requests_total = 0
        # Set first thing by close(): a handler that wakes from its pause then writes no reply, as a
        # process that died writes none (waking it before its connection is cut let it answer).
        self.dead = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self, port: int = 0) -> Self:
        """Serve on `port` (0: one the system picks). A server closed and started again on its old
        port is a server that died and came back (the fault drill, tests/test_fault_drill.py)."""
        self.dead.clear()
        server = _Server(("127.0.0.1", port), self.handler)
        server.fake = self
        self._server = server
        # shutdown() waits for the next poll; a short one keeps every test teardown quick.
        self._thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
        self._thread.start()
        return self

    def stopping(self) -> None:
        """Called first by close(): wake whatever a handler waits on, so that it can finish."""

    def connected(self, connection: socket.socket) -> None:
        if self.dead.is_set():  # accepted as close() began: cut like the rest
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        with self._cond:
            self._connections = {c for c in self._connections if c.fileno() != -1}
            self._connections.add(connection)

    def close(self) -> None:
        """Stop listening and cut every open connection, as a server process that dies does (a
        kept-alive connection would otherwise go on being served by its handler thread)."""
        self.dead.set()
        self.stopping()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        with self._cond:
            connections, self._connections = self._connections, set()
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join()

    @property
    def port(self) -> int:
        assert self._server is not None, f"{type(self).__name__} is not started"
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        assert self._server is not None, f"{type(self).__name__} is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def received(self) -> list[Received]:
        with self._cond:
            return list(self._received)

    def record(self, seen: Received) -> None:
        """Count and keep a request as it arrives (call with `_cond` held, or let this take it)."""
        with self._cond:
            self.requests_total += 1
            self._received.append(seen)


F = TypeVar("F", bound=LoopbackServer)


class LoopbackHandler(BaseHTTPRequestHandler, Generic[F]):
    """Reads each request into a Received and hands it to `serve`; writes replies with a length."""

    protocol_version = "HTTP/1.1"  # keep-alive, as real servers do; bodies need a length or chunks
    # Real servers set TCP_NODELAY too; without it, headers and body in two writes meet delayed ACKs.
    disable_nagle_algorithm = True

    @property
    def fake(self) -> F:
        return cast(F, cast(_Server, self.server).fake)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.serve(*self._read("GET"))

    def do_POST(self) -> None:
        self.serve(*self._read("POST"))

    def _read(self, method: str) -> tuple[Received, bool]:
        """The request, and whether its body was JSON (or empty)."""
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body: Any = json.loads(raw) if raw else None
            is_json = True
        except ValueError:
            body, is_json = raw.decode("utf-8", "replace"), False
        headers = {k.lower(): v for k, v in self.headers.items()}
        return Received(method, urlsplit(self.path).path, headers, body), is_json

    def serve(self, received: Received, is_json: bool) -> None:
        raise NotImplementedError

    def send_json(self, code: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self.send_bytes(code, json.dumps(payload).encode(), "application/json", headers)

    def server_died(self) -> bool:
        """Whether the server was closed while this request was served: then its connection is cut
        and no reply is written."""
        if not self.fake.dead.is_set():
            return False
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)
        return True

    def send_bytes(
        self, code: int, data: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        if self.server_died():
            return
        self.send_response(code)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
