"""Every count in a design's metrics comes from the records `judgeloop audit` reads: for every
registered design, the committed metrics are checked against the calls audit lists, stage by stage
(issue 25: `reasked: 0` after three re-asks). judge-evaluate's own count is checked the same way."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from pipeline.experiments.design import Design, resolve
from pipeline.experiments.registry import designs
from pipeline.experiments.steps import LLMStep
from pipeline.llm.backends import register_backend
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.types import ChatReply, ChatRequest
from pipeline.testing.structured_responder import structured_responder
from pipeline.tools.cli import main
from tests.conftest import ROOT


def audited(stage: str) -> list[dict[str, Any]]:
    """The calls `judgeloop audit --stage STAGE --format jsonl` lists, in the repository."""
    result = CliRunner().invoke(main, ["audit", "--stage", stage, "--format", "jsonl"])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def question(call: dict[str, Any]) -> str:
    context = {k: v for k, v in call["context"].items() if k != "attempt"}
    return json.dumps(context, sort_keys=True)


def counted(calls: list[dict[str, Any]]) -> dict[str, int]:
    """What an auditor counts by reading the calls one by one."""
    reasks = [c for c in calls if c["context"].get("attempt", 0) > 0]
    reasons = Counter(c["reply"].get("done_reason") for c in calls)
    return {
        "calls": len(calls),
        "reasks": len(reasks),
        "reasked": len({question(c) for c in reasks}),
        "cut_at_num_predict": reasons["length"],
        "too_long": reasons["prompt_too_long"],
    }


def llm_stages(design: Design[Any]) -> list[str]:
    return [stage.name for stage in design.stages if isinstance(stage.load(), LLMStep)]


def metrics_of(design: Design[Any]) -> dict[str, Any]:
    params = design.load_params()
    (path,) = [resolve(m, params) for stage in design.stages for m in stage.metrics]
    return json.loads((ROOT / path).read_text())  # type: ignore[no-any-return]


@pytest.fixture(autouse=True)
def in_the_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("JUDGELOOP_PARAMS", raising=False)


@pytest.mark.parametrize("design", designs(), ids=lambda d: d.name)
def test_the_recorded_call_counts_are_what_audit_lists(design: Design[Any]) -> None:
    metrics = metrics_of(design)
    stages = llm_stages(design)
    assert sorted(metrics["recorded_calls"]) == sorted(stages)
    for stage in stages:
        assert metrics["recorded_calls"][stage] == counted(audited(stage)), stage


def test_each_designs_own_counts_are_what_audit_lists() -> None:
    by_name = {d.name: metrics_of(d) for d in designs()}
    paper, rag, regen = by_name["paper"], by_name["rag"], by_name["regen"]
    selection, summeval = by_name["selection"], by_name["summeval"]
    for stage in ("assess", "judge", "refine"):
        assert paper["calls"][stage] == len(audited(stage))
    assert rag["reasked"] == counted(audited("rag_judge"))["reasked"]
    regen_calls = sum(len(audited(s)) for s in ("regen_generate", "regen_evaluate", "regen_regenerate"))
    assert regen["calls"]["original"] + regen["calls"]["added"] == regen_calls
    score = audited("select_score")
    assert selection["judgements"]["reasked"] == counted(score)["reasked"] > 0  # the demo has re-asks
    for stage in ("select_score", "select_pick"):
        assert selection["calls"][stage]["recorded"] == len(audited(stage))
    judged = audited("summeval_judge")
    for dimension, outcome in summeval["judge"]["outcomes"].items():
        mine = [c for c in judged if c["context"]["labels"].get("metric") == dimension]
        assert outcome["calls_judged"] == len(mine)


# -- judge-evaluate's own count ------------------------------------------------------------------


def _first_reply_unusable(request: ChatRequest) -> ChatReply | str:
    """Each row's first ask (system and user message) gets no JSON, its re-ask a valid reply: every
    row takes two calls."""
    if len(request.messages) == 2:
        return ChatReply(text="no JSON here", done_reason="stop")
    return structured_responder(request)


register_backend(
    "counts-fake", lambda settings, cache: FakeBackend(_first_reply_unusable, name=settings.model)
)


def test_judge_evaluate_reports_the_calls_audit_lists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(
        yaml.safe_dump({"llm": {"backend": "counts-fake", "model": "m"}, "cache": {"dir": "cache"}})
    )
    rows = [{"id": f"r{i}", "question": f"Q{i}?", "answer": f"A{i}."} for i in range(3)]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "more.jsonl").write_text(json.dumps({"id": "s1", "question": "Q?", "answer": "B."}) + "\n")
    for batch, expected_run, expected_total in (
        ("rows.jsonl", 6, 6),
        ("more.jsonl", 2, 8),
        ("rows.jsonl", 6, 8),
    ):
        result = CliRunner().invoke(main, ["judge-evaluate", "--batch", batch, "--out", "s.jsonl"])
        assert result.exit_code == 0, result.output
        calls = audited("judge_evaluate")
        assert len(calls) == expected_total
        assert f"judge_evaluate: {expected_run} calls this run" in result.output
        assert f"the recording holds {expected_total} calls" in result.output
        ids = {json.loads(line)["id"] for line in (tmp_path / batch).read_text().splitlines()}
        assert len([c for c in calls if c["context"]["item"] in ids]) == expected_run
