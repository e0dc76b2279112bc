"""Errors that teach (issue 32, item 4): a model tag the server lacks is answered with the tags it
has, the closest first; a server that refuses connections is found before any stage starts; RAG
rows that are not JSONL name the fields a row needs; `judge-evaluate --batch` exits non-zero when
no row was scored."""

from __future__ import annotations

import hashlib
import json
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner
from tenacity import wait_none

from pipeline.data.rag_rows import load_rag_rows
from pipeline.errors import InputError, ModelNotFoundError
from pipeline.llm.backends.ollama import OllamaBackend, closest_first
from pipeline.llm.settings import LLMSettings
from pipeline.testing.fake_ollama import FakeOllama
from pipeline.tools.preflight import refused


def _digest(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


def test_an_unknown_tag_is_answered_with_the_servers_tags_closest_first() -> None:
    assert closest_first("gemma3:27B", ["llama3:8b", "gemma3:4b", "gemma3:27b"])[0] == "gemma3:27b"
    models = {name: _digest(name) for name in ("gemma3:27b", "gemma3:4b", "llama3.1:8b")}
    with FakeOllama(models=models) as server:
        settings = LLMSettings(base_url=server.url, model="gemma3:27B", read_timeout_s=5.0)
        with pytest.raises(ModelNotFoundError) as raised:
            OllamaBackend(settings, wait=wait_none()).identity()
    said = raised.value.message
    assert "ollama pull gemma3:27B" in said
    assert said.index("gemma3:27b") < said.index("gemma3:4b") < said.index("llama3.1:8b")


def test_a_refused_connection_is_told_from_a_server_that_answers() -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]  # closed again below: nothing listens there
    assert refused(f"http://127.0.0.1:{port}", timeout=2.0) is not None
    with FakeOllama() as server:
        assert refused(server.url, timeout=2.0) is None


def test_rag_rows_in_csv_are_refused_naming_the_fields(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("id,question,answer\nq1,what,that\n", encoding="utf-8")
    with pytest.raises(InputError) as raised:
        load_rag_rows(rows)
    assert "id, question, answer" in raised.value.message and "not CSV" in raised.value.message


def test_judge_evaluate_fails_when_no_row_is_scored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline.tools.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(
        "llm:\n  backend: fake\n  model: terse\ncache:\n  dir: .judgeloop/cache\n"
        "rag:\n  num_predict: 16\n  max_attempts: 1\n",
        encoding="utf-8",
    )
    rows = tmp_path / "rows.jsonl"
    row = {"id": "q1", "question": "What port?", "answer": "8080", "contexts": ["port 8080"]}
    rows.write_text(json.dumps(row) + "\n", encoding="utf-8")
    # 16 tokens a reply: every verdict is cut short, so every row is recorded unscored.
    result = CliRunner().invoke(main, ["judge-evaluate", "--batch", str(rows), "--out", "scores.jsonl"])
    assert result.exit_code != 0, result.output
    assert "no row of" in result.output and "was scored" in result.output


def test_status_in_auto_mode_says_what_the_server_said_not_replay_mode(tmp_path: Path) -> None:
    from pipeline.errors import ConfigError
    from pipeline.llm.recordings.index import RecordingIndex
    from pipeline.llm.settings import CacheSettings, EngineSettings
    from pipeline.tools.status.identities import next_identity

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    llm = LLMSettings(
        backend="ollama", model="gemma3:27b", base_url=f"http://127.0.0.1:{port}", max_retries=0
    )
    params = EngineSettings(llm=llm, cache=CacheSettings(dir=str(tmp_path / "cache")))
    with pytest.raises(ConfigError) as raised:
        next_identity(params, RecordingIndex(tmp_path / "recordings"), offline=False)
    said = raised.value.message
    assert "replay mode" not in said and f"127.0.0.1:{port}" in said and "gemma3:27b" in said
