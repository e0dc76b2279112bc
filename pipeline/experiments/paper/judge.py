"""The paper's judge step: every assessment scored on each metric (see .assess on steps)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pipeline.data.transcripts import Transcript, index_transcripts
from pipeline.experiments.paper.params import PaperParams
from pipeline.experiments.steps import Done, LLMStep, Upstream, jsonl_output, results_of, share
from pipeline.judges.rubric.judge import judge_all
from pipeline.judges.rubric.results import Assessment, AssessmentJudgements
from pipeline.judges.samples import only_seeds_differ
from pipeline.judges.unscored import unscored_reasons
from pipeline.llm.runner import held, iter_items
from pipeline.llm.session import LLMSession
from pipeline.llm.types import CallContext


def _judged(result: AssessmentJudgements) -> tuple[int, list[str]]:
    """What one item adds to the end line: its judgements, and why each unscored one is."""
    return len(result.metrics), [m.reading for m in result.metrics.values() if m.score is None]


def _said(judged: list[tuple[int, list[str]]]) -> str:
    unscored = [reading for _, readings in judged for reading in readings]
    said = share(len(unscored), sum(count for count, _ in judged), "judgements", "unscored")
    why = unscored_reasons(unscored)
    return f"{said} ({why})" if why else said


def stream_judge(
    params: PaperParams,
    session: LLMSession,
    transcripts: Mapping[str, Transcript],
    assessments: Iterable[Assessment],
) -> Iterable[AssessmentJudgements]:
    said = only_seeds_differ(params.judge.samples, params.llm.options)
    if said is not None:
        print(f"judge: {said}", file=sys.stderr)

    def judge_item(assessment: Assessment) -> AssessmentJudgements:
        context = CallContext(stage="judge", item=assessment.item, step=0)
        metrics = judge_all(
            session,
            transcripts[assessment.item],
            assessment.text,
            params.judge.metrics,
            params.judge,
            params.llm.options,
            context,
        )
        return AssessmentJudgements(item=assessment.item, metrics=metrics)

    return iter_items(session, assessments, judge_item, "judge")


run_judge = held(stream_judge)


@dataclass(frozen=True)
class JudgeInputs:
    transcripts: Mapping[str, Transcript]
    assessments: Iterable[Assessment]  # read again from their file at each pass (results_of)


def judge_inputs(params: PaperParams, upstream: Upstream) -> JudgeInputs:
    transcripts = index_transcripts(params.data).by_id  # each read when its item runs
    return JudgeInputs(transcripts, results_of(upstream, "assess", jsonl_output(Assessment)))


STEP: LLMStep[PaperParams, JudgeInputs, AssessmentJudgements] = LLMStep(
    inputs=judge_inputs,
    items=lambda inputs: [a.item for a in inputs.assessments],
    stream=lambda params, session, inputs: stream_judge(
        params, session, inputs.transcripts, inputs.assessments
    ),
    output=jsonl_output(AssessmentJudgements),
    done=Done(_judged, _said),
)
