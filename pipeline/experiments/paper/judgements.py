"""The paper's judgement unit for `judgeloop diff`: one metric of one item's assessment at one
iteration of the feedback loop, as the refine stage's results hold them (or the judge stage's,
iteration 0, where refine has not run). The input judged is the assessment's text; a metric that
refine.rejudge=low carried over from an earlier iteration is that iteration's judgement, not a new one.
"""

from __future__ import annotations

from collections.abc import Iterator

from pipeline.data.jsonl import read_jsonl
from pipeline.experiments.judgements import Judgement, RunFiles, text_id
from pipeline.experiments.paper.params import PaperParams
from pipeline.judges.rubric.results import Assessment, AssessmentJudgements, MetricJudgement
from pipeline.loops.results import Refinement

DESIGN = "paper"


def _judgement(
    params: PaperParams, item: str, iteration: int, judged: MetricJudgement, assessment: str | None
) -> Judgement:
    refine = params.refine
    if judged.score is None:
        passed = False if refine.unscored_triggers else None  # an unscored metric is not a pass
    else:
        passed = judged.score > refine.threshold  # a score at or below the threshold triggers refine
    return Judgement(
        design=DESIGN,
        item=item,
        iteration=iteration,
        metric=judged.metric,
        score=judged.score,
        passed=passed,
        keys=judged.call_keys,
        upstream=None if assessment is None else text_id(assessment),
        samples=judged.samples or (),
        threshold=refine.threshold,
    )


def judgements(params: PaperParams, run: RunFiles) -> Iterator[Judgement]:
    refinements = run.path(params.refine.out)
    if refinements.is_file():
        for refinement in read_jsonl(refinements, Refinement):
            for it in refinement.iterations:
                for judged in it.metrics.values():
                    if not judged.carried_over:
                        yield _judgement(params, refinement.item, it.iteration, judged, it.assessment.text)
        return
    judged_path = run.path(params.judge.out)
    if not judged_path.is_file():
        return
    assessed = run.path(params.assess.out)
    texts = {a.item: a.text for a in read_jsonl(assessed, Assessment)} if assessed.is_file() else {}
    for row in read_jsonl(judged_path, AssessmentJudgements):
        for judged in row.metrics.values():
            yield _judgement(params, row.item, 0, judged, texts.get(row.item))
