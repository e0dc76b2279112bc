"""The SummEval judge step: every summary rated on each dimension, 1-5, by the configured model.

The reply is constrained to `{"score": N}` and asked with token log-probabilities, so each row
holds both the score the judge wrote (the argmax row of the calibration) and G-Eval's
probability-weighted score. A reply that never validates is recorded unscored with its failure
kind and text, and counted: it never becomes a score.

Calls run article by article, then dimension, then system: the prompt opens with the dimension's
rubric and the article, so consecutive calls share that prefix and the embedded backend re-uses it.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.data.summeval import Summary, SummEval
from pipeline.experiments.summeval.params import SummEvalParams
from pipeline.experiments.summeval.prompts import rubric_prompt
from pipeline.experiments.summeval.results import SummEvalJudgement, SummEvalReply
from pipeline.judges.geval import field_distribution
from pipeline.llm.runner import run_items
from pipeline.llm.session import LLMSession
from pipeline.llm.structured import Structured, StructuredFailure, ask_structured
from pipeline.llm.types import CallContext, Message

STAGE = "summeval_judge"


def judge_order(corpus: SummEval, dimensions: Sequence[str]) -> list[tuple[Summary, str]]:
    """(summary, dimension) pairs grouped by article, then dimension, systems in file order."""
    by_document: dict[str, list[Summary]] = {}
    for summary in corpus.summaries:
        by_document.setdefault(summary.document, []).append(summary)
    return [
        (summary, dimension)
        for summaries in by_document.values()
        for dimension in dimensions
        for summary in summaries
    ]


def judgement_from(
    summary: Summary, dimension: str, result: Structured[SummEvalReply] | StructuredFailure
) -> SummEvalJudgement:
    common = {
        "item": summary.item,
        "document": summary.document,
        "system": summary.system,
        "dimension": dimension,
        "attempts": result.attempts,
        "text": result.text,
    }
    if isinstance(result, StructuredFailure):
        return SummEvalJudgement(
            **common,
            score=None,
            weighted_score=None,
            probabilities=None,
            mass=None,
            failure=result.kind,
            error=result.error,
        )
    distribution = field_distribution(result.text, result.reply.logprobs, "score")
    return SummEvalJudgement(
        **common,
        score=result.value.score,
        # Rounded so that the same recorded reply gives the same bytes on any machine.
        weighted_score=round(distribution.expected, 6) if distribution else None,
        probabilities={str(v): round(p, 6) for v, p in distribution.probabilities.items()}
        if distribution
        else None,
        mass=round(distribution.mass, 6) if distribution else None,
        failure=None,
        error=None,
    )


def run_summeval_judge(
    params: SummEvalParams, session: LLMSession, corpus: SummEval
) -> list[SummEvalJudgement]:
    settings = params.summeval
    options = params.llm.options.model_copy(update={"num_predict": settings.num_predict})

    def judge(pair: tuple[Summary, str]) -> SummEvalJudgement:
        summary, dimension = pair
        prompt = rubric_prompt(dimension, corpus.articles[summary.document], summary.text)
        context = CallContext(stage=STAGE, item=summary.item, step=0, labels={"metric": dimension})
        result = ask_structured(
            session,
            [Message(role="user", content=prompt)],
            SummEvalReply,
            options,
            context,
            max_attempts=settings.max_attempts,
            logprobs=settings.top_logprobs,
        )
        return judgement_from(summary, dimension, result)

    return run_items(session, judge_order(corpus, settings.dimensions), judge, STAGE)
