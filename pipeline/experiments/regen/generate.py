"""The generate step: each row's original answer, the model's own or the row's given one."""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.data.rag_rows import RagRow
from pipeline.experiments.regen.params import RegenParams, load_rows
from pipeline.experiments.steps import LLMStep, jsonl_output, share
from pipeline.judges.quality.generator import generate, given
from pipeline.judges.quality.results import Answer
from pipeline.llm.latency import TimedCalls
from pipeline.llm.runner import run_items
from pipeline.llm.session import LLMSession
from pipeline.llm.types import CallContext

STAGE = "regen_generate"


def run_generate(params: RegenParams, session: LLMSession, rows: Sequence[RagRow]) -> list[Answer]:
    settings = params.regen_generate
    if settings.answers == "given":
        return [given(row) for row in rows]

    def answer(row: RagRow) -> Answer:
        context = CallContext(stage=STAGE, item=row.id, step=0)
        return generate(TimedCalls(session), row, settings, params.llm.options, context)

    return run_items(session, rows, answer, STAGE)


STEP: LLMStep[RegenParams, list[RagRow], Answer] = LLMStep(
    inputs=lambda params, _: load_rows(params),
    items=lambda rows: [row.id for row in rows],
    work=run_generate,
    output=jsonl_output(Answer),
    done=lambda answers: share(
        sum(a.truncated for a in answers), len(answers), "answers", "cut at num_predict"
    ),
)
