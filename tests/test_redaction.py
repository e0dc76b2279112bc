"""A server URL's credentials (userinfo, a token in the query) never reach a message, a log line,
`judgeloop status` or a file the run writes: they are masked as ***."""

from __future__ import annotations

import json
import logging
import socket
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from pipeline.errors import BackendError, ConfigError, InputError, TransientBackendError
from pipeline.experiments.params import load_params
from pipeline.llm.redact import redact, redact_url
from pipeline.llm.settings import LLMSettings
from pipeline.testing.fake_ollama import FakeOllama
from pipeline.testing.structured_responder import structured_ollama_responder
from pipeline.tools.cli import main
from tests.project import recorded_project, write_params

USER, PASSWORD, TOKEN = "alice-user", "pa55-w0rd-secret", "tok-9f8e7d6c5b4a"
SECRETS = (USER, PASSWORD, TOKEN)


def secret_url(host_port: str) -> str:
    return f"http://{USER}:{PASSWORD}@{host_port}/?api_key={TOKEN}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def assert_clean(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} leaked: {text[:500]}"


def test_a_url_is_shown_with_its_credentials_masked() -> None:
    assert redact_url(secret_url("h:1")) == "http://***@h:1/?api_key=***"
    said = f"POST http://{USER}:{PASSWORD}@h:1/api/chat: cannot connect; see http://h:1/x?token={TOKEN}."
    assert redact(said) == "POST http://***@h:1/api/chat: cannot connect; see http://h:1/x?token=***."


def test_every_judgeloop_error_masks_a_validated_urls_secrets_even_outside_a_url() -> None:
    LLMSettings(base_url=secret_url("127.0.0.1:9"))  # validated once: its secrets are known from now on
    for error in (
        BackendError(f"user {USER} refused"),
        TransientBackendError(f"host said {PASSWORD}"),
        ConfigError(f"key {TOKEN}"),
        InputError("f.jsonl", 1, f"has {TOKEN}", "fix"),
    ):
        assert_clean(error.message)
        assert "***" in error.message


def test_a_params_error_about_the_url_masks_it(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"llm": {"base_url": f"ftp://{USER}:{PASSWORD}@host/?token={TOKEN}"}}))
    with pytest.raises(ConfigError) as caught:
        load_params(path, environ={})
    assert "is not an http(s) URL" in caught.value.message
    assert_clean(caught.value.message)


def test_a_failed_stage_its_log_and_its_files_name_no_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    url = secret_url(f"127.0.0.1:{free_port()}")
    llm = {"backend": "ollama", "model": "test-model", "base_url": url, "max_retries": 1}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"llm": llm, "cache": {"dir": "cache"}}))
    (tmp_path / "rows.jsonl").write_text(json.dumps({"id": "r1", "question": "Q?", "answer": "A."}) + "\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["judge-evaluate", "--batch", "rows.jsonl", "--out", "s.jsonl"])
    assert result.exit_code == 1
    assert "the server at http://***@127.0.0.1:" in result.output and "is down" in result.output
    assert_clean(result.output)
    assert_clean("\n".join(record.getMessage() for record in caplog.records))


def test_a_run_through_a_url_with_credentials_records_none_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeOllama(responder=structured_ollama_responder) as server:
        url = secret_url(server.url.removeprefix("http://"))
        llm = {"backend": "ollama", "model": "test-model", "base_url": url}
        (tmp_path / "params.yaml").write_text(yaml.safe_dump({"llm": llm, "cache": {"dir": "cache"}}))
        (tmp_path / "rows.jsonl").write_text(
            json.dumps({"id": "r1", "question": "Q?", "answer": "A."}) + "\n"
        )
        monkeypatch.chdir(tmp_path)
        result = CliRunner().invoke(main, ["judge-evaluate", "--batch", "rows.jsonl", "--out", "s.jsonl"])
    assert result.exit_code == 0, result.output
    assert_clean(result.output)
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "params.yaml"]
    assert any(p.name == "calls.jsonl" for p in written)
    for path in written:
        assert_clean(path.read_bytes().decode("utf-8", "replace"))


def test_status_names_no_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    recorded_project(tmp_path)
    url = secret_url(f"127.0.0.1:{free_port()}")
    llm = {"backend": "ollama", "model": "m", "digest": "sha256:0", "base_url": url, "max_retries": 0}
    write_params(tmp_path, llm=llm)
    result = CliRunner().invoke(main, ["status"])
    assert "http://***@127.0.0.1" in result.output, result.output
    assert_clean(result.output)
