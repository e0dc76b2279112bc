"""Unscored, said at once (issue 32, item 3): a judge answering 1-10 on a 1-5 rubric leaves every
judgement unscored; the end lines name the reasons with a hint, the feedback loop stops each item
within one iteration instead of spending max_iterations, and refine.stop_unscored_share stops the
stage before it refines anything."""

from __future__ import annotations

import re
from pathlib import Path

from pipeline.experiments.paper import judge as judge_step
from pipeline.experiments.paper import refine as refine_step
from pipeline.judges.unscored import ANOTHER_SCALE, unscored_reasons
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.types import ChatRequest
from tests.project import run_pipeline, scripted, write_data, write_params


def ten_point_judge(request: ChatRequest) -> str:
    """The scripted model, but its judge answers on a 1-10 scale."""
    reply = scripted(request)
    if re.search(r"output for (\w+) only", request.messages[0].content):
        return re.sub(r"Score: \d", "Score: 8", reply)
    return reply


def _run(root: Path, **refine: object) -> tuple[FakeBackend, dict[str, int]]:
    write_data(root)
    params = write_params(root, refine={"max_iterations": 10, **refine})
    assert params.judge.output == "text"
    fake = FakeBackend(ten_point_judge, name="ten-point-judge")
    return fake, run_pipeline(root, fake)


def test_the_reasons_come_with_a_hint() -> None:
    said = unscored_reasons(["out_of_range"] * 12 + ["scale_mismatch"] * 8 + ["no_score"])
    assert said == f"{ANOTHER_SCALE}: 12 out_of_range, 8 scale_mismatch, 1 no_score"
    assert unscored_reasons([]) == ""


def test_a_ten_point_judge_stops_within_one_iteration_and_says_why(tmp_path: Path) -> None:
    from pipeline.data.jsonl import read_jsonl
    from pipeline.judges.rubric.results import AssessmentJudgements
    from pipeline.loops.results import Refinement

    _, made = _run(tmp_path)
    judged = read_jsonl(tmp_path / "outputs/paper/judgements.jsonl", AssessmentJudgements)
    assert all(m.score is None for j in judged for m in j.metrics.values())
    judge_line = judge_step.STEP.done(judged)  # type: ignore[misc]
    assert judge_line.startswith(f"12 of 12 judgements unscored ({ANOTHER_SCALE}: ")
    assert "out_of_range" in judge_line

    refinements = read_jsonl(tmp_path / "outputs/paper/refinement.jsonl", Refinement)
    assert {r.stop_reason for r in refinements} == {"all_unscored"}
    assert all(len(r.iterations) == 2 for r in refinements)  # iteration 0 and one refinement, not 10
    # assess + 4 metrics x (1 + re-asks) per iteration: far below 10 iterations' worth
    assert made["refine"] < 3 * (1 + 4 * 2) + 1
    refine_line = refine_step.STEP.done(refinements)  # type: ignore[misc]
    assert "another scale" in refine_line and "out_of_range" in refine_line
    assert "3 items stopped early (all_unscored" in refine_line


def test_past_the_share_the_stage_refines_nothing(tmp_path: Path) -> None:
    from pipeline.data.jsonl import read_jsonl
    from pipeline.loops.results import Refinement

    _, made = _run(tmp_path, stop_unscored_share=0.5)
    refinements = read_jsonl(tmp_path / "outputs/paper/refinement.jsonl", Refinement)
    assert {r.stop_reason for r in refinements} == {"stage_unscored"}
    assert made["refine"] == 0
    assert "stage_unscored" in refine_step.STEP.done(refinements)  # type: ignore[misc]


def test_turned_off_the_loop_spends_its_iterations(tmp_path: Path) -> None:
    from pipeline.data.jsonl import read_jsonl
    from pipeline.loops.results import Refinement

    _run(tmp_path / "a", stop_unscored=False, max_iterations=2)
    refinements = read_jsonl(tmp_path / "a/outputs/paper/refinement.jsonl", Refinement)
    assert {r.stop_reason for r in refinements} == {"max_iterations"}
