"""The RAG judge step: every row judged once on the params' dimensions, side by side through the
cache (pipeline.llm.runner). Used by the rag_judge stage and by `judgeloop judge-evaluate --batch`."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from pydantic import Field

from pipeline.data.rag_rows import RagRow, load_rag_rows
from pipeline.experiments.rag.params import RagParams
from pipeline.experiments.rag.prompt import rag_messages
from pipeline.experiments.rag.settings import RagSettings
from pipeline.experiments.steps import LLMStep, counted, jsonl_output
from pipeline.judges.samples import SampledResult, only_seeds_differ, sample_options
from pipeline.judges.structured.judge import (
    DimensionsJudgement,
    combined_dimensions,
    dimension_samples,
    judge,
)
from pipeline.llm.runner import held, iter_items
from pipeline.llm.session import LLMSession
from pipeline.llm.structured import ChatSession
from pipeline.llm.types import CallContext, Options


class RagJudgement(SampledResult):
    item: str
    judgement: DimensionsJudgement
    labels: dict[str, int] = Field(default_factory=dict)  # the row's human labels, if any
    # rag.samples > 1: each dimension's score in each sample, sample 0 first; `judgement` combines
    # them. Left out of the file while None, so a run with one sample writes what it wrote before.
    samples: dict[str, tuple[int | None, ...]] | None = None


def rag_options(settings: RagSettings, options: Options) -> Options:
    return options.model_copy(update={"num_predict": settings.num_predict})


def judge_row(
    session: ChatSession, row: RagRow, settings: RagSettings, options: Options, stage: str
) -> RagJudgement:
    context = CallContext(stage=stage, item=row.id, labels={"prompt": settings.prompt_mode})
    messages = rag_messages(row, settings.dimensions, settings.prompt_mode, settings.max_context_chars)

    def ask(sample: int, where: CallContext) -> DimensionsJudgement:
        return judge(
            session,
            messages,
            settings.dimensions,
            sample_options(rag_options(settings, options), sample),
            where,
            max_attempts=settings.max_attempts,
            logprobs=settings.logprobs,
        )

    if settings.samples == 1:
        return RagJudgement(item=row.id, judgement=ask(0, context), labels=row.labels)
    # Each sample its own seed, recorded under its `sample` label; the row's judgement their majority.
    judged = [ask(i, context.at(sample=str(i))) for i in range(settings.samples)]
    return RagJudgement(
        item=row.id,
        judgement=combined_dimensions(judged, settings.dimensions),
        labels=row.labels,
        samples=dimension_samples(judged, settings.dimensions),
    )


def stream_rag_judge(
    session: LLMSession,
    rows: Sequence[RagRow],
    settings: RagSettings,
    options: Options,
    stage: str = "rag_judge",
    work: Callable[[RagRow], RagJudgement] | None = None,
) -> Iterable[RagJudgement]:
    said = only_seeds_differ(settings.samples, options)
    if said is not None:
        print(f"{stage}: {said.replace('judge.samples', 'rag.samples')}", file=sys.stderr)
    return iter_items(
        session, rows, work or (lambda row: judge_row(session, row, settings, options, stage)), stage
    )


run_rag_judge = held(stream_rag_judge)


def _rows(params: RagParams) -> list[RagRow]:
    settings = params.rag
    return load_rag_rows(Path(settings.rows), only=settings.only, limit=settings.limit)


STEP: LLMStep[RagParams, list[RagRow], RagJudgement] = LLMStep(
    inputs=lambda params, _: _rows(params),
    items=lambda rows: [row.id for row in rows],
    stream=lambda params, session, rows: stream_rag_judge(session, rows, params.rag, params.llm.options),
    output=jsonl_output(RagJudgement),
    done=counted(lambda r: r.judgement.status == "failed", "rows", "unscored"),
)
