"""The evaluate step: every original answer scored by the structured evaluator."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pipeline.data.rag_rows import RagRow
from pipeline.experiments.regen.params import RegenParams, load_rows
from pipeline.experiments.steps import LLMStep, Upstream, counted, jsonl_output
from pipeline.judges.quality.evaluator import evaluate
from pipeline.judges.quality.results import Answer, EvaluatedAnswer
from pipeline.judges.samples import only_seeds_differ
from pipeline.llm.latency import TimedCalls
from pipeline.llm.runner import held, iter_items
from pipeline.llm.session import LLMSession
from pipeline.llm.types import CallContext

STAGE = "regen_evaluate"


def stream_evaluate(
    params: RegenParams, session: LLMSession, rows: Mapping[str, RagRow], answers: Sequence[Answer]
) -> Iterable[EvaluatedAnswer]:
    said = only_seeds_differ(params.regen_evaluate.samples, params.llm.options)
    if said is not None:
        print(f"{STAGE}: {said.replace('judge.samples', 'regen_evaluate.samples')}", file=sys.stderr)

    def evaluate_one(answer: Answer) -> EvaluatedAnswer:
        context = CallContext(stage=STAGE, item=answer.item, step=0)
        return evaluate(
            TimedCalls(session), rows[answer.item], answer, params.regen_evaluate, params.llm.options, context
        )

    return iter_items(session, answers, evaluate_one, STAGE)


run_evaluate = held(stream_evaluate)


@dataclass(frozen=True)
class EvaluateInputs:
    rows: Mapping[str, RagRow]
    answers: list[Answer]


def evaluate_inputs(params: RegenParams, upstream: Upstream) -> EvaluateInputs:
    rows = {row.id: row for row in load_rows(params)}
    return EvaluateInputs(rows, upstream("regen_generate", jsonl_output(Answer)))


STEP: LLMStep[RegenParams, EvaluateInputs, EvaluatedAnswer] = LLMStep(
    inputs=evaluate_inputs,
    items=lambda inputs: [a.item for a in inputs.answers],
    stream=lambda params, session, inputs: stream_evaluate(params, session, inputs.rows, inputs.answers),
    output=jsonl_output(EvaluatedAnswer),
    done=counted(lambda e: e.evaluation is None, "evaluations", "unscored"),
)
