"""The generate step: each row's original answer, the model's own or the row's given one."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pipeline.data.rag_rows import RagRow
from pipeline.experiments.regen.params import RegenParams, load_rows
from pipeline.experiments.steps import LLMStep, counted, jsonl_output
from pipeline.judges.quality.generator import generate, given
from pipeline.judges.quality.results import Answer
from pipeline.llm.latency import TimedCalls
from pipeline.llm.runner import held, iter_items
from pipeline.llm.session import LLMSession
from pipeline.llm.types import CallContext

STAGE = "regen_generate"


def stream_generate(params: RegenParams, session: LLMSession, rows: Sequence[RagRow]) -> Iterable[Answer]:
    settings = params.regen_generate
    if settings.answers == "given":
        return [given(row) for row in rows]

    def answer(row: RagRow) -> Answer:
        context = CallContext(stage=STAGE, item=row.id, step=0)
        return generate(TimedCalls(session), row, settings, params.llm.options, context)

    return iter_items(session, rows, answer, STAGE)


run_generate = held(stream_generate)


STEP: LLMStep[RegenParams, list[RagRow], Answer] = LLMStep(
    inputs=lambda params, _: load_rows(params),
    items=lambda rows: [row.id for row in rows],
    stream=stream_generate,
    output=jsonl_output(Answer),
    done=counted(lambda a: a.truncated, "answers", "cut at num_predict"),
)
