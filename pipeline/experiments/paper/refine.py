"""The paper's refine step: the feedback loop over every judged assessment (see .assess on steps)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pipeline.data.transcripts import Transcript
from pipeline.experiments.paper.params import PaperParams
from pipeline.judges.rubric.results import Assessment, AssessmentJudgements
from pipeline.llm.runner import run_items
from pipeline.llm.session import LLMSession
from pipeline.loops.feedback import refine
from pipeline.loops.results import Refinement


def run_refine(
    params: PaperParams,
    session: LLMSession,
    transcripts: Mapping[str, Transcript],
    assessments: Mapping[str, Assessment],
    judgements: Sequence[AssessmentJudgements],
) -> list[Refinement]:
    def refine_item(judgement: AssessmentJudgements) -> Refinement:
        return refine(
            session,
            transcripts[judgement.item],
            assessments[judgement.item],
            judgement.metrics,
            params.refine,
            params.assess,
            params.judge,
            params.llm.options,
        )

    return run_items(session, judgements, refine_item, "refine")
