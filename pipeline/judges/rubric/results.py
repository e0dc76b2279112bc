"""What the paper's assessor and judge produce, as written to outputs/*.jsonl."""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.data.jsonl import Result
from pipeline.judges.judgement import Judgement
from pipeline.judges.samples import SampledResult


class Assessment(Result):
    item: str
    text: str  # the model's last reply, exactly as written
    sections: dict[str, str] | None  # the XML sections, when the reply validated
    valid: bool
    problem: str | None = None  # why the last reply failed validation
    call_keys: tuple[str, ...]  # every call made, re-asks included
    unverified_quotes: tuple[str, ...] = ()


class MetricJudgement(SampledResult):
    metric: str
    # None: unscored after every re-ask, never a default; a float only under judge.decimal_scores=keep
    score: int | float | None
    reading: str  # how the score was read: pipeline.judges.scores' reasons, or "json" / a json failure kind
    explanation: str  # the judge's last reply, exactly as written
    call_keys: tuple[str, ...]
    carried_over: bool = False  # refine.rejudge=low: not re-judged this iteration
    # judge.top_logprobs > 0: the probability of each score at the score's token, and their
    # expected value (G-Eval's weighted score). None when the reply carried no log-probabilities.
    score_probabilities: dict[str, float] | None = None
    weighted_score: float | None = None
    # judge.samples > 1: each sample's score, sample 0 first; `score` combines them (judge.combine).
    # Left out of the file while None, so a run with one sample writes what it wrote before.
    samples: tuple[int | float | None, ...] | None = None

    @classmethod
    def of(cls, metric: str, judgement: Judgement[int | float]) -> MetricJudgement:
        distribution = judgement.distributions.get("score")
        return cls(
            metric=metric,
            score=judgement.value,
            reading=judgement.reading,
            explanation=judgement.explanation,
            call_keys=judgement.call_keys,
            score_probabilities=None
            if distribution is None
            else {str(value): p for value, p in distribution.probabilities.items()},
            weighted_score=None if distribution is None else distribution.expected,
        )


def in_order(metrics: dict[str, MetricJudgement], order: Sequence[str]) -> dict[str, MetricJudgement]:
    """The metrics in the configured order (judge.metrics). The files are canonical JSON with sorted
    keys, so what is read back lists them alphabetically; prompts and reports follow the config."""
    return {name: metrics[name] for name in order if name in metrics} | {
        name: judged for name, judged in metrics.items() if name not in order
    }


class AssessmentJudgements(Result):
    item: str
    metrics: dict[str, MetricJudgement]
