"""A prompt too long for the model's context window: by default the row or item is named, recorded
unscored with the reason (`too_long`), counted in the metrics, and the others are judged; a replay
takes the same course with no model; `llm.too_long: fail` stops at the first one, naming it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from pipeline.errors import PromptTruncatedError
from pipeline.experiments.registry import load_design
from pipeline.llm.backends import register_backend
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.types import ChatReply, ChatRequest
from pipeline.testing.fake_ollama import FakeOllama
from pipeline.testing.structured_responder import structured_ollama_responder, structured_responder
from pipeline.tools.cli import main
from stages.runner import run_stage
from tests.project import MODEL, recorded_project, run_pipeline, scripted

HUGE = "A source far too long for the context. " * 400  # ~16,000 characters: ~4,000 fake tokens
BUILT: list[FakeBackend] = []


def _fits(request: ChatRequest) -> str | ChatReply:
    """A model with a small window: a prompt holding HUGE is refused, as llama.cpp refuses it."""
    if any(HUGE in m.content for m in request.messages):
        raise PromptTruncatedError("Requested tokens (4180) exceed context window of 2048")
    return structured_responder(request)


class SmallWindow(FakeBackend):
    kind = "small-window"  # the name it is registered under, so that a replay finds its identity


def _build(settings: Any, cache_dir: Path) -> FakeBackend:
    BUILT.append(SmallWindow(_fits, name=settings.model))
    return BUILT[-1]


register_backend("small-window", _build)


def rows_file(root: Path) -> Path:
    rows = [
        {"id": "r1", "question": "Which port?", "answer": "7070.", "contexts": ["It listens on 7070."]},
        {"id": "r2", "question": "Which port?", "answer": "7070.", "contexts": [HUGE]},
        {"id": "r3", "question": "Which host?", "answer": "localhost.", "contexts": ["Bound to localhost."]},
    ]
    path = root / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def params(root: Path, **llm: Any) -> None:
    sections = {
        "llm": {"backend": "small-window", "model": "m", **llm},
        "cache": {"dir": "cache"},
        "rag": {"rows": "rows.jsonl", "logprobs": None},
    }
    (root / "params.yaml").write_text(yaml.safe_dump(sections))


def batch(root: Path, monkeypatch: pytest.MonkeyPatch, **env: str) -> Any:
    monkeypatch.chdir(root)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return CliRunner().invoke(main, ["judge-evaluate", "--batch", "rows.jsonl", "--out", "scores.jsonl"])


def scores(root: Path) -> dict[str, dict[str, Any]]:
    lines = (root / "scores.jsonl").read_text().splitlines()
    return {row["item"]: row["judgement"] for row in map(json.loads, lines)}


def test_a_row_too_long_is_named_recorded_unscored_and_the_others_judged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    params(tmp_path)
    rows_file(tmp_path)
    result = batch(tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output
    assert "rows.jsonl:2: row r2: the prompt does not fit the model's context window" in result.output
    assert "2 scored, 1 failed (recorded, not scored; 1 too long for the context)" in result.output
    judged = scores(tmp_path)
    assert judged["r2"]["status"] == "failed" and judged["r2"]["kind"] == "too_long"
    assert "exceed context window of 2048" in judged["r2"]["error"]
    assert judged["r2"]["attempts"] == 1  # not re-asked: a re-ask is longer still
    assert {judged["r1"]["status"], judged["r3"]["status"]} == {"scored"}
    # The refusal is recorded, so audit shows it and a replay makes the same decision with no model.
    audit = CliRunner().invoke(main, ["audit", "--stage", "judge_evaluate", "--item", "r2"])
    assert "done_reason prompt_too_long" in audit.stdout
    first = (tmp_path / "scores.jsonl").read_text()
    BUILT.clear()
    replay = batch(tmp_path, monkeypatch, JUDGELOOP_CACHE_MODE="replay")
    assert replay.exit_code == 0, replay.output
    assert (tmp_path / "scores.jsonl").read_text() == first and BUILT == []


def test_too_long_fail_stops_the_batch_at_the_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    params(tmp_path, too_long="fail")
    rows_file(tmp_path)
    (tmp_path / "scores.jsonl").write_text("the last good scores\n")
    result = batch(tmp_path, monkeypatch)
    assert result.exit_code == 1
    assert "rows.jsonl:2: row r2: stage=judge_evaluate item=r2 prompt=full:" in result.output
    assert "llm.too_long: fail" in result.output and "Fix: shorten the row" in result.output
    assert (tmp_path / "scores.jsonl").read_text() == "the last good scores\n"


def test_a_stage_records_the_item_unscored_and_its_metrics_count_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    params(tmp_path)
    rows_file(tmp_path)
    monkeypatch.chdir(tmp_path)
    run_stage("rag", "rag_judge")
    run_stage("rag", "rag_aggregate")
    metrics = json.loads(Path("outputs/rag/metrics.json").read_text())
    assert metrics["rows"] == 3 and metrics["scored"] == 2 and metrics["failed"] == {"too_long": 1}
    assert metrics["recorded_calls"]["rag_judge"]["too_long"] == 1


def test_a_stage_with_too_long_fail_stops_naming_the_item(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    params(tmp_path, too_long="fail")
    rows_file(tmp_path)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        PromptTruncatedError, match=r"stage=rag_judge item=r2 prompt=full: .*exceed context window"
    ):
        run_stage("rag", "rag_judge")
    assert not Path("recordings/rag_judge").exists()  # a failed stage records nothing
    assert load_design("rag").stage("rag_judge")


def test_the_papers_text_judge_records_a_too_long_metric_unscored(tmp_path: Path) -> None:
    """The paper's free-text judge (no schema): the metric is unscored with reading too_long."""

    def small_window(request: ChatRequest) -> str | ChatReply:
        first = request.messages[0].content
        if "output for specificity only" in first.lower() and "ohio 902" in first:
            raise PromptTruncatedError("the input length exceeds the context length")
        return scripted(request)

    recorded_project(tmp_path)

    transcripts = (tmp_path / "data" / "902_P" / "902_TRANSCRIPT.csv").read_text()
    (tmp_path / "data" / "902_P" / "902_TRANSCRIPT.csv").write_text(transcripts.replace("ohio", "ohio 902"))
    run_pipeline(tmp_path, FakeBackend(small_window, name=MODEL), ("assess", "judge"))
    judged = [
        json.loads(line) for line in (tmp_path / "outputs/paper/judgements.jsonl").read_text().splitlines()
    ]
    (item,) = [j for j in judged if j["item"] == "902"]
    assert item["metrics"]["specificity"]["reading"] == "too_long"
    assert item["metrics"]["specificity"]["score"] is None


def test_over_http_an_ollama_refusal_is_recorded_unscored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeOllama(responder=structured_ollama_responder) as server:
        params(tmp_path, backend="ollama", model="test-model", base_url=server.url, options={"num_ctx": 2048})
        rows_file(tmp_path)
        result = batch(tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output
    assert scores(tmp_path)["r2"]["kind"] == "too_long"
    assert "input length exceeds the context length" in scores(tmp_path)["r2"]["error"]
