"""The RAG judge step: every row judged once on the params' dimensions, side by side through the
cache (pipeline.llm.runner). Used by the rag_judge stage and by `judgeloop judge-evaluate --batch`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import Field

from pipeline.data.jsonl import Result
from pipeline.data.rag_rows import RagRow, load_rag_rows
from pipeline.experiments.rag.params import RagParams
from pipeline.experiments.rag.prompt import rag_messages
from pipeline.experiments.rag.settings import RagSettings
from pipeline.experiments.steps import LLMStep, jsonl_output, share
from pipeline.judges.structured.judge import DimensionsJudgement, judge
from pipeline.llm.runner import run_items
from pipeline.llm.session import LLMSession
from pipeline.llm.structured import ChatSession
from pipeline.llm.types import CallContext, Options


class RagJudgement(Result):
    item: str
    judgement: DimensionsJudgement
    labels: dict[str, int] = Field(default_factory=dict)  # the row's human labels, if any


def rag_options(settings: RagSettings, options: Options) -> Options:
    return options.model_copy(update={"num_predict": settings.num_predict})


def judge_row(
    session: ChatSession, row: RagRow, settings: RagSettings, options: Options, stage: str
) -> RagJudgement:
    context = CallContext(stage=stage, item=row.id, labels={"prompt": settings.prompt_mode})
    judgement = judge(
        session,
        rag_messages(row, settings.dimensions, settings.prompt_mode, settings.max_context_chars),
        settings.dimensions,
        rag_options(settings, options),
        context,
        max_attempts=settings.max_attempts,
        logprobs=settings.logprobs,
    )
    return RagJudgement(item=row.id, judgement=judgement, labels=row.labels)


def run_rag_judge(
    session: LLMSession,
    rows: Sequence[RagRow],
    settings: RagSettings,
    options: Options,
    stage: str = "rag_judge",
    work: Callable[[RagRow], RagJudgement] | None = None,
) -> list[RagJudgement]:
    return run_items(
        session, rows, work or (lambda row: judge_row(session, row, settings, options, stage)), stage
    )


def _rows(params: RagParams) -> list[RagRow]:
    settings = params.rag
    return load_rag_rows(Path(settings.rows), only=settings.only, limit=settings.limit)


STEP: LLMStep[RagParams, list[RagRow], RagJudgement] = LLMStep(
    inputs=lambda params, _: _rows(params),
    items=lambda rows: [row.id for row in rows],
    work=lambda params, session, rows: run_rag_judge(session, rows, params.rag, params.llm.options),
    output=jsonl_output(RagJudgement),
    done=lambda results: share(
        sum(r.judgement.status == "failed" for r in results), len(results), "rows", "unscored"
    ),
)
