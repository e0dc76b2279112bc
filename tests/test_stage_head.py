"""What an LLM stage does before its first request and need not (issue 31, bench/stage_head.py): it
imports httpx without httpx's command-line client, and a client of a plain-HTTP server builds no
certificate store. Neither changes a request: a server over TLS is verified as before, and with a
proxy in the environment the client is httpx's own, that proxy used and verified."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys

import httpx
import pytest

from pipeline.llm.backends.http_errors import make_client
from pipeline.llm.settings import LLMSettings
from tests.conftest import ROOT

# A fresh interpreter as `python -m stages paper judge` starts, up to the stage's inputs (stopped
# there), then httpx imported as its backend imports it.
STAGE_THEN_HTTPX = """
import json, sys
import stages.runner as runner

class Stop(Exception):
    pass

def stop(*args, **kwargs):
    raise Stop

design, stage, step = runner.load("paper", "judge")
params = design.load_params()
assert "httpx" not in sys.modules
runner.FileUpstream = stop
try:
    runner.run_llm_step(design, stage, step, params)
except Stop:
    pass
import httpx
marked = sys.modules.get("httpx._main", "absent") is None
print(json.dumps([marked, "rich" in sys.modules, callable(httpx.Client)]))
"""


def test_an_llm_stage_imports_httpx_without_its_command_line_client() -> None:
    done = subprocess.run(
        [sys.executable, "-c", STAGE_THEN_HTTPX], cwd=ROOT, capture_output=True, text=True, check=True
    )
    marked_absent, rich, client = json.loads(done.stdout.strip().splitlines()[-1])
    assert marked_absent and not rich and client


def test_loading_a_stage_leaves_httpx_alone() -> None:
    """Only a stage that runs is told: loading one (as `judgeloop dvc-yaml` does, walking every
    module it loaded) leaves sys.modules as Python makes it."""
    probe = "\n".join(
        (
            "import json, sys",
            "import stages.__main__",
            "from stages.runner import load",
            "load('paper', 'judge')",
            "print(json.dumps(all(m is not None for m in list(sys.modules.values()))))",
        )
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert json.loads(done.stdout.strip().splitlines()[-1])


def _context(transport: httpx.BaseTransport) -> ssl.SSLContext:
    context = transport._pool._ssl_context  # type: ignore[attr-defined]
    assert isinstance(context, ssl.SSLContext)
    return context


def test_a_plain_http_server_s_client_loads_no_certificates_and_trusts_none() -> None:
    client = make_client(LLMSettings(base_url="http://127.0.0.1:11434"), None)
    context = _context(client._transport)
    assert context.cert_store_stats()["x509_ca"] == 0
    # Were TLS ever spoken through it, the handshake would fail, not go unverified.
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    client.close()


def test_an_https_server_s_client_is_verified_as_before() -> None:
    client = make_client(LLMSettings(base_url="https://example.invalid"), None)
    context = _context(client._transport)
    assert context.cert_store_stats()["x509_ca"] > 0 and context.verify_mode == ssl.CERT_REQUIRED
    client.close()


def test_a_proxy_from_the_environment_keeps_its_verified_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "https://proxy.invalid:3128")
    client = make_client(LLMSettings(base_url="http://127.0.0.1:11434"), None)
    proxied = [transport for pattern, transport in client._mounts.items() if transport is not None]
    assert proxied, "the environment's proxy is mounted, as httpx mounts it for a client of its own"
    assert all(_context(t).cert_store_stats()["x509_ca"] > 0 for t in proxied)
    assert _context(client._transport).cert_store_stats()["x509_ca"] > 0
    client.close()


def test_a_given_transport_is_kept() -> None:
    given = httpx.MockTransport(lambda request: httpx.Response(200, json={}))
    client = make_client(LLMSettings(base_url="http://127.0.0.1:11434"), given)
    assert client._transport is given
    client.close()
