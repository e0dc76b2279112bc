"""The feedback loop's prompts depend on the judgements, not on the order they were read back in."""

from __future__ import annotations

from pathlib import Path

from pipeline.data.transcripts import load_transcripts
from pipeline.experiments.paper.params import PaperParams
from pipeline.judges.rubric.results import Assessment, MetricJudgement
from pipeline.loops.feedback import refine
from tests.conftest import ROOT
from tests.helpers import make_session


def test_feedback_follows_the_configured_metric_order_not_the_files(tmp_path: Path) -> None:
    params = PaperParams.model_validate(
        {"data": {"transcripts": str(ROOT / "data" / "demo"), "limit": 1}, "refine": {"max_iterations": 1}}
    )
    transcript = load_transcripts(params.data)[0]
    assessment = Assessment(
        item=transcript.item_id,
        text="<assessment>fine</assessment>",
        sections=None,
        valid=False,
        call_keys=(),
    )
    judged = {
        name: MetricJudgement(
            metric=name, score=2, explanation=f"{name} is weak", reading="labelled", call_keys=()
        )
        for name in params.judge.metrics
    }
    # As read back from outputs/paper/judgements.jsonl, whose canonical JSON sorts the keys.
    alphabetical = dict(sorted(judged.items()))
    assert list(alphabetical) != list(judged)
    prompts: list[str] = []
    for metrics in (judged, alphabetical):
        session, _ = make_session(tmp_path / str(len(prompts)), stage="refine")
        result = refine(
            session,
            transcript,
            assessment,
            metrics,
            params.refine,
            params.assess,
            params.judge,
            params.llm.options,
        )
        prompt = result.iterations[1].regeneration_prompt
        assert prompt is not None
        prompts.append(prompt)
        session.close()
    assert prompts[0] == prompts[1]
    first = [prompts[0].index(f"**{name.upper()}**") for name in params.judge.metrics]
    assert first == sorted(first)  # coherence, completeness, specificity, accuracy: the paper's order
