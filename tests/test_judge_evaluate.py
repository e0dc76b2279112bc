"""`judgeloop judge-evaluate`: one answer, and a batch of rows, in-process and over loopback HTTP."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from pipeline.data.jsonl import read_jsonl
from pipeline.experiments.rag.judge import RagJudgement
from pipeline.experiments.rag.settings import RagSettings
from pipeline.judges.structured.dimensions import judge_score_model
from pipeline.judges.structured.judge import ScoredDimensions, UnscoredDimensions
from pipeline.llm.backends import register_backend
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.recordings.stage_reader import read_stage
from pipeline.llm.settings import in_flight
from pipeline.llm.types import ChatReply
from pipeline.testing.fake_ollama import FakeOllama
from pipeline.testing.structured_responder import structured_ollama_responder, structured_responder
from pipeline.tools.cli import main
from tests.conftest import ROOT

BACKENDS: dict[str, FakeBackend] = {}


def _fake(name: str, responder: Any = structured_responder) -> None:
    def build(settings: Any, cache_dir: Path) -> FakeBackend:
        backend = FakeBackend(responder, name=settings.model)
        BACKENDS[name] = backend
        return backend

    register_backend(name, build)


_fake("rag-fake")
# A reply taken as is (the fake backend would otherwise constrain it to the schema).
_fake("rag-mute", lambda request: ChatReply(text="no JSON here", done_reason="stop"))


def _project(root: Path, llm: dict[str, Any]) -> None:
    (root / "params.yaml").write_text(yaml.safe_dump({"llm": llm, "cache": {"dir": "cache"}}))


def _invoke(root: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> Result:
    monkeypatch.chdir(root)
    return CliRunner().invoke(main, ["judge-evaluate", *args], catch_exceptions=False)


def _answer(root: Path) -> Path:
    path = root / "answer.json"
    path.write_text(
        json.dumps({"answer": "Use --port 8081.", "sources_used": ["serve.md"], "confidence": 0.9})
    )
    (root / "serve.md").write_text("tidepool serve listens on 7070; --port N picks another.")
    return path


def test_single_answer_prints_a_valid_judge_score(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _project(tmp_path, {"backend": "rag-fake", "model": "m"})
    _answer(tmp_path)
    args = ("How do I change the port?", "--answer-file", "answer.json", "--context-file", "serve.md")
    result = _invoke(tmp_path, monkeypatch, *args, "--json", "--id", "q1")
    assert result.exit_code == 0, result.output
    score = json.loads(result.stdout)
    judge_score_model(RagSettings().dimensions).model_validate(score)
    dims = RagSettings().dimensions
    assert score["overall_score"] == pytest.approx(dims.weighted_mean(score))
    prompt = BACKENDS["rag-fake"].calls[0].messages[1].content
    assert "tidepool serve listens on 7070" in prompt and "Use --port 8081." in prompt
    # recorded like the pipeline's calls, so audit shows the exact prompt, selected by a label
    audit = CliRunner().invoke(
        main, ["audit", "--stage", "judge_evaluate", "--item", "q1", "--label", "prompt=full"]
    )
    assert audit.exit_code == 0, audit.output
    assert "tidepool serve listens on 7070" in audit.output and "--- reply ---" in audit.output
    # a second answer adds to the recording instead of replacing it
    assert _invoke(tmp_path, monkeypatch, *args, "--id", "q2").exit_code == 0
    items = [c.call.context.item for c in read_stage(Path("recordings/judge_evaluate"))]
    assert sorted(items) == ["q1", "q2"]


def test_plain_text_answer_and_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _project(tmp_path, {"backend": "rag-fake", "model": "m"})
    (tmp_path / "a.txt").write_text("Port 7070.\n")
    result = _invoke(tmp_path, monkeypatch, "Which port?", "--answer-file", "a.txt")
    assert result.exit_code == 0, result.output
    assert "overall (weighted)" in result.stdout and "accuracy" in result.stdout


def test_a_failed_judgement_says_which_failure_it_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(tmp_path, {"backend": "rag-mute", "model": "m"})
    (tmp_path / "a.txt").write_text("Port 7070.")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["judge-evaluate", "Q?", "-f", "a.txt", "--json"])
    assert result.exit_code == 1
    assert "invalid" in result.output and "judgeloop audit --stage judge_evaluate" in result.output
    assert result.stdout == ""  # nothing that could pass for a score


def _rows(root: Path) -> Path:
    path = root / "rows.jsonl"
    lines = (ROOT / "data" / "rag-demo" / "rows.jsonl").read_text().splitlines()
    lines.insert(2, '{"id": "broken", "question": "no answer field"}')
    lines.insert(4, '{"id": "d01", "question": "an id used before", "answer": "."}')
    path.write_text("\n".join(lines) + "\n")
    return path


def test_batch_skips_bad_rows_into_the_errors_file_and_resumes_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(tmp_path, {"backend": "rag-fake", "model": "m", "parallelism": 4})
    _rows(tmp_path)
    result = _invoke(tmp_path, monkeypatch, "--batch", "rows.jsonl", "--out", "out/scores.jsonl")
    assert result.exit_code == 0, result.output
    errors = [json.loads(line) for line in Path("out/scores.errors.jsonl").read_text().splitlines()]
    assert [e["line"] for e in errors] == [3, 5]
    assert "rows.jsonl:3" in result.output and "id d01 is already used on line 1" in errors[1]["problem"]
    scores = read_jsonl(Path("out/scores.jsonl"), RagJudgement)
    assert len(scores) == 8 and all(isinstance(s.judgement, ScoredDimensions) for s in scores)
    first = Path("out/scores.jsonl").read_bytes()
    assert len(BACKENDS["rag-fake"].calls) == 8

    # run again (say after an interruption): every call is a cache hit, none reaches the model
    again = _invoke(tmp_path, monkeypatch, "--batch", "rows.jsonl", "--out", "out/scores.jsonl")
    assert again.exit_code == 0 and "0 to the model" in again.output
    assert BACKENDS["rag-fake"].calls == []
    assert Path("out/scores.jsonl").read_bytes() == first


def test_a_line_that_is_not_json_refuses_the_batch_before_any_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(tmp_path, {"backend": "rag-fake", "model": "m"})
    lines = (ROOT / "data" / "rag-demo" / "rows.jsonl").read_text().splitlines()
    lines.insert(3, '{"id": "cut", "question": "a line cut sho')
    (tmp_path / "rows.jsonl").write_text("\n".join(lines) + "\n")
    BACKENDS.pop("rag-fake", None)
    result = _invoke(tmp_path, monkeypatch, "--batch", "rows.jsonl", "--out", "scores.jsonl")
    assert result.exit_code == 1
    assert (
        "rows.jsonl:4: not JSON" in result.output and "Fix: write one JSON object per line" in result.output
    )
    assert "rag-fake" not in BACKENDS and not (tmp_path / "scores.jsonl").exists()  # no model was built


@pytest.mark.parametrize("option", ["--out", "--errors"])
def test_an_output_that_is_the_batch_itself_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str
) -> None:
    _project(tmp_path, {"backend": "rag-fake", "model": "m"})
    rows = (ROOT / "data" / "rag-demo" / "rows.jsonl").read_text()
    (tmp_path / "rows.jsonl").write_text(rows)
    args = ["--batch", "rows.jsonl", "--out", "scores.jsonl", option, "./rows.jsonl"]
    result = _invoke(tmp_path, monkeypatch, *args)
    assert result.exit_code == 2
    assert "is the batch itself" in result.output and option in result.output
    assert (tmp_path / "rows.jsonl").read_text() == rows


def test_an_answer_file_that_opens_like_json_but_is_not_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(tmp_path, {"backend": "rag-fake", "model": "m"})
    (tmp_path / "answer.json").write_text('{"answer": "Use --port 8081.",\n "sources_used": [serve.md]}')
    BACKENDS.pop("rag-fake", None)
    result = _invoke(tmp_path, monkeypatch, "How?", "--answer-file", "answer.json")
    assert result.exit_code == 1
    assert "answer.json:2: opens like JSON but is not JSON" in result.output
    assert "rag-fake" not in BACKENDS


def test_batch_that_fails_leaves_no_half_written_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(
        tmp_path, {"backend": "ollama", "base_url": "http://127.0.0.1:9", "model": "m", "max_retries": 0}
    )
    shutil.copy(ROOT / "data" / "rag-demo" / "rows.jsonl", tmp_path / "rows.jsonl")
    (tmp_path / "scores.jsonl").write_text("earlier run\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["judge-evaluate", "--batch", "rows.jsonl", "--out", "scores.jsonl"])
    assert result.exit_code != 0
    assert (tmp_path / "scores.jsonl").read_text() == "earlier run\n"


def test_batch_against_the_fake_ollama_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(ROOT / "data" / "rag-demo" / "rows.jsonl", tmp_path / "rows.jsonl")
    with FakeOllama(responder=structured_ollama_responder, parallel_slots=4) as server:
        _project(
            tmp_path, {"backend": "ollama", "base_url": server.url, "model": "test-model", "parallelism": 4}
        )
        result = _invoke(tmp_path, monkeypatch, "--batch", "rows.jsonl", "--out", "scores.jsonl")
        assert result.exit_code == 0, result.output
        assert server.requests_to("/api/chat") == 8 and server.max_in_flight <= in_flight(4)
        (tmp_path / "answer.txt").write_text("Port 7070, or --port N.")
        single = _invoke(tmp_path, monkeypatch, "Which port?", "-f", "answer.txt", "--json")
        assert single.exit_code == 0, single.output
    scores = read_jsonl(tmp_path / "scores.jsonl", RagJudgement)
    assert not any(isinstance(s.judgement, UnscoredDimensions) for s in scores)
    judge_score_model(RagSettings().dimensions).model_validate_json(single.stdout)
