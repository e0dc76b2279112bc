"""The SummEval judge step: every summary rated on each dimension, 1-5, by the configured model.

The reply is constrained to `{"score": N}` and asked with token log-probabilities, so each row
holds both the score the judge wrote (the argmax row of the calibration) and G-Eval's
probability-weighted score. A reply that never validates is recorded unscored with its failure
kind and text, and counted: it never becomes a score.

Calls run article by article, then dimension, then system: the prompt opens with the dimension's
rubric and the article, so consecutive calls share that prefix and the embedded backend re-uses it.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from pipeline.data.summeval import Summary, SummEval, load_summeval, subset
from pipeline.experiments.steps import Done, LLMStep, jsonl_output
from pipeline.experiments.summeval.params import SummEvalParams, SummEvalSettings
from pipeline.experiments.summeval.prompts import rubric_prompt
from pipeline.experiments.summeval.results import SummEvalJudgement, SummEvalReply
from pipeline.judges.geval import ScoreDistribution
from pipeline.judges.judgement import Judgement, from_structured
from pipeline.judges.samples import Combine, combine, only_seeds_differ, sample_options
from pipeline.llm.runner import held, iter_items
from pipeline.llm.scheduling import side_by_side
from pipeline.llm.session import LLMSession
from pipeline.llm.structured import ChatSession, FailureKind, StructuredResult, ask_structured
from pipeline.llm.types import CallContext, Message, Options

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


@dataclass(frozen=True)
class SummaryOnDimension:
    """What the SummEval judge is asked about: one summary of an article, on one dimension."""

    summary: Summary
    article: str
    dimension: str

    def context(self) -> CallContext:
        return CallContext(stage=STAGE, item=self.summary.item, step=0, labels={"metric": self.dimension})


class SummEvalJudge:
    """The calibration judge, a Judge[SummaryOnDimension, int]: the dimension's rubric, the reply
    constrained to {"score": N}, with the score's G-Eval distribution (summeval.top_logprobs)."""

    def __init__(self, session: ChatSession, settings: SummEvalSettings, options: Options) -> None:
        self.session, self.settings = session, settings
        self.options = options.model_copy(update={"num_predict": settings.num_predict})

    def __call__(self, subject: SummaryOnDimension, context: CallContext) -> Judgement[int]:
        prompt = rubric_prompt(subject.dimension, subject.article, subject.summary.text)
        result = ask_structured(
            self.session,
            [Message(role="user", content=prompt)],
            SummEvalReply,
            self.options,
            context,
            max_attempts=self.settings.max_attempts,
            logprobs=self.settings.top_logprobs,
        )
        return reply_judgement(result)


def reply_judgement(result: StructuredResult[SummEvalReply]) -> Judgement[int]:
    """The judgement of the judge's reply, by the stage and by `judgeloop audit` alike (replies.py)."""
    return from_structured(result, lambda reply: reply.score, lambda reply: "", score_fields=("score",))


def weighted_score(distribution: ScoreDistribution) -> float:
    """G-Eval's weighted score as the judge step writes it: rounded so that the same recorded reply
    gives the same bytes on any machine."""
    return round(distribution.expected, 6)


def summeval_judgement(subject: SummaryOnDimension, judgement: Judgement[int]) -> SummEvalJudgement:
    """The row the judge step writes; numbers rounded so that the same recorded reply gives the
    same bytes on any machine."""
    distribution = judgement.distributions.get("score")
    return SummEvalJudgement(
        item=subject.summary.item,
        document=subject.summary.document,
        system=subject.summary.system,
        dimension=subject.dimension,
        attempts=judgement.attempts,
        text=judgement.text,
        score=judgement.value,
        weighted_score=weighted_score(distribution) if distribution else None,
        probabilities={str(v): round(p, 6) for v, p in distribution.probabilities.items()}
        if distribution
        else None,
        mass=round(distribution.mass, 6) if distribution else None,
        # Unscored, a schema-constrained reply's reading is its failure's kind.
        failure=None if judgement.scored else cast(FailureKind, judgement.reading),
        error=judgement.error,
    )


def combined(samples: list[SummEvalJudgement], how: Combine) -> SummEvalJudgement:
    """summeval.samples > 1: sample 0's row, its score the samples' combined and its weighted score
    their mean (pipeline.judges.samples)."""
    weighted = [s.weighted_score for s in samples if s.weighted_score is not None]
    return samples[0].model_copy(
        update={
            "score": combine([s.score for s in samples], how),
            "weighted_score": round(sum(weighted) / len(weighted), 6) if weighted else None,
            "samples": tuple(s.score for s in samples),
            "attempts": sum(s.attempts for s in samples),
        }
    )


def stream_summeval_judge(
    params: SummEvalParams, session: LLMSession, corpus: SummEval
) -> Iterable[SummEvalJudgement]:
    settings, options = params.summeval, params.llm.options
    judges = [SummEvalJudge(session, settings, sample_options(options, i)) for i in range(settings.samples)]
    said = only_seeds_differ(settings.samples, options)
    if said is not None:
        print(f"{STAGE}: {said.replace('judge.samples', 'summeval.samples')}", file=sys.stderr)

    def judge_pair(pair: tuple[Summary, str]) -> SummEvalJudgement:
        summary, dimension = pair
        subject = SummaryOnDimension(summary, corpus.articles[summary.document], dimension)
        if settings.samples == 1:
            return summeval_judgement(subject, judges[0](subject, subject.context()))
        asks = [
            (lambda i=i: summeval_judgement(subject, judges[i](subject, subject.context().at(sample=str(i)))))
            for i in range(settings.samples)
        ]
        return combined(side_by_side(asks, at_once=session.calls_at_once), settings.combine)

    return iter_items(session, judge_order(corpus, params.summeval.dimensions), judge_pair, STAGE)


run_summeval_judge = held(stream_summeval_judge)


def judged_items(corpus: SummEval) -> list[str]:
    """The summaries in the order judge_order first reaches them (each is judged on every dimension)."""
    by_document: dict[str, list[str]] = {}
    for summary in corpus.summaries:
        by_document.setdefault(summary.document, []).append(summary.item)
    return [item for items in by_document.values() for item in items]


def _outcomes(kinds: list[str]) -> str:
    outcomes = Counter(kinds)
    return ", ".join(f"{n} {kind}" for kind, n in sorted(outcomes.items()))


def _corpus(params: SummEvalParams) -> SummEval:
    return subset(load_summeval(Path(params.summeval.corpus)), params.summeval.documents)


STEP: LLMStep[SummEvalParams, SummEval, SummEvalJudgement] = LLMStep(
    inputs=lambda params, _: _corpus(params),
    items=judged_items,
    stream=stream_summeval_judge,
    output=jsonl_output(SummEvalJudgement),
    done=Done(lambda j: j.failure or "scored", _outcomes),
)
