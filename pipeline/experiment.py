"""The experiment's steps as functions of params, a session and their inputs, with no file I/O.

The stage modules call these and write the results; `judgeloop status` calls them in replay mode
to learn, without a model, which calls the next run would need.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pipeline.assessment import assess
from pipeline.config import Params
from pipeline.judging import judge_all
from pipeline.llm.session import LLMSession
from pipeline.llm.types import CallContext
from pipeline.refinement import refine
from pipeline.results import Assessment, Judgement, Refinement
from pipeline.runner import run_items
from pipeline.transcripts import Transcript


def run_assess(params: Params, session: LLMSession, transcripts: Sequence[Transcript]) -> list[Assessment]:
    return run_items(
        session, transcripts, lambda t: assess(session, t, params.assess, params.llm.options), "assess"
    )


def run_judge(
    params: Params,
    session: LLMSession,
    transcripts: Mapping[str, Transcript],
    assessments: Sequence[Assessment],
) -> list[Judgement]:
    def judge_item(assessment: Assessment) -> Judgement:
        context = CallContext(stage="judge", item=assessment.item, iteration=0)
        metrics = judge_all(
            session,
            transcripts[assessment.item],
            assessment.text,
            params.judge.metrics,
            params.judge,
            params.llm.options,
            context,
        )
        return Judgement(item=assessment.item, metrics=metrics)

    return run_items(session, assessments, judge_item, "judge")


def run_refine(
    params: Params,
    session: LLMSession,
    transcripts: Mapping[str, Transcript],
    assessments: Mapping[str, Assessment],
    judgements: Sequence[Judgement],
) -> list[Refinement]:
    def refine_item(judgement: Judgement) -> Refinement:
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
