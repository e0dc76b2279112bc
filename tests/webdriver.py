"""A minimal W3C WebDriver client for the browser tests: chromedriver over plain HTTP JSON.

Why not selenium or the DevTools websocket: both need a Python dependency the project does not
otherwise have, while WebDriver is plain HTTP and httpx is already a dependency. Only what the tests
use is here. Every call and every wait is bounded, so a wedged browser fails a test, never hangs it.
"""

from __future__ import annotations

import base64
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"  # the W3C key of an element reference
CHROME_ARGS = (
    "--headless=new",
    "--no-sandbox",  # CI containers run as root, where Chromium's sandbox refuses to start
    "--disable-gpu",
    "--disable-dev-shm-usage",  # /dev/shm is tiny in containers
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
)


# Every request but to this machine goes to a proxy that is not there: the network is cut for the page.
NO_NETWORK = ("--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>")


class WebDriverError(RuntimeError):
    pass


def free_port() -> int:
    # chromedriver needs a fixed port; the OS picks an unused one. Another process could take it
    # before chromedriver binds it, which start() reports as chromedriver not becoming ready.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Chrome:
    """One chromedriver process and one headless Chromium session; use as a context manager."""

    def __init__(
        self,
        profile: Path,
        log: Path,
        *,
        width: int = 1280,
        height: int = 900,
        timeout: float = 30,
        args: tuple[str, ...] = (),
    ) -> None:
        self.profile, self.log, self.timeout, self.args = profile, log, timeout, args
        self.size = (width, height)
        self.process: subprocess.Popen[bytes] | None = None
        self.session: str | None = None
        self.http: httpx.Client | None = None

    def __enter__(self) -> Chrome:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        port = free_port()
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [str(CHROMEDRIVER), f"--port={port}", "--allowed-ips=127.0.0.1"],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=self.timeout)
        deadline = time.monotonic() + self.timeout
        while True:
            if self.process.poll() is not None:
                raise WebDriverError(f"chromedriver exited with {self.process.returncode}; see {self.log}")
            try:
                if self.http.get("/status", timeout=2).json()["value"]["ready"]:
                    break
            except (httpx.HTTPError, ValueError, KeyError):
                pass
            if time.monotonic() > deadline:
                raise WebDriverError(f"chromedriver not ready after {self.timeout}s; see {self.log}")
            time.sleep(0.1)
        options = {
            "binary": str(CHROMIUM),
            "args": [
                *CHROME_ARGS,
                *self.args,
                f"--user-data-dir={self.profile}",
                f"--window-size={self.size[0]},{self.size[1]}",
            ],
        }
        value = self._call(
            "POST", "/session", {"capabilities": {"alwaysMatch": {"goog:chromeOptions": options}}}
        )
        self.session = str(value["sessionId"])
        self._call(
            "POST",
            self._s("/timeouts"),
            {"implicit": 0, "pageLoad": int(self.timeout * 1000), "script": 10_000},
        )

    def close(self) -> None:
        try:
            if self.session is not None and self.http is not None:
                self.http.delete(f"/session/{self.session}", timeout=10)
        except httpx.HTTPError:
            pass  # the process is killed below either way
        finally:
            self.session = None
            if self.http is not None:
                self.http.close()
            if self.process is not None and self.process.poll() is None:
                self.process.terminate()
                try:
                    self.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(timeout=10)

    def _s(self, path: str) -> str:
        assert self.session is not None, "no WebDriver session"
        return f"/session/{self.session}{path}"

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        assert self.http is not None
        response = self.http.request(method, path, json=body if method == "POST" else None)
        payload = response.json()
        value = payload.get("value") if isinstance(payload, dict) else None
        if response.status_code != 200 or (isinstance(value, dict) and "error" in value):
            detail = value.get("message", "") if isinstance(value, dict) else payload
            raise WebDriverError(f"{method} {path}: HTTP {response.status_code}: {str(detail)[:500]}")
        return value

    def get(self, url: str) -> None:
        self._call("POST", self._s("/url"), {"url": url})

    def find(self, css: str) -> str:
        return str(self._call("POST", self._s("/element"), {"using": "css selector", "value": css})[ELEMENT])

    def click(self, element: str) -> None:
        self._call("POST", self._s(f"/element/{element}/click"), {})

    def displayed(self, element: str) -> bool:
        return bool(self._call("GET", self._s(f"/element/{element}/displayed")))

    def attribute(self, element: str, name: str) -> str | None:
        value = self._call("GET", self._s(f"/element/{element}/attribute/{name}"))
        return None if value is None else str(value)

    def text(self, element: str) -> str:
        return str(self._call("GET", self._s(f"/element/{element}/text")))

    def execute(self, script: str, *args: Any) -> Any:
        return self._call("POST", self._s("/execute/sync"), {"script": script, "args": list(args)})

    def wait_until(self, script: str, *args: Any, timeout: float = 5) -> None:
        deadline = time.monotonic() + timeout
        while not self.execute(script, *args):
            if time.monotonic() > deadline:
                raise WebDriverError(f"timed out after {timeout}s waiting for: {script}")
            time.sleep(0.05)

    def screenshot(self, *, full_page: bool = False) -> bytes:
        """A PNG of the viewport, or of the whole page (through chromedriver's DevTools passthrough)."""
        if not full_page:
            return base64.b64decode(self._call("GET", self._s("/screenshot")))
        width, height = self.execute(
            "return [document.documentElement.scrollWidth, document.documentElement.scrollHeight];"
        )
        shot = self._call(
            "POST",
            self._s("/goog/cdp/execute"),
            {
                "cmd": "Page.captureScreenshot",
                "params": {
                    "format": "png",
                    "captureBeyondViewport": True,
                    "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
                },
            },
        )
        return base64.b64decode(shot["data"])
