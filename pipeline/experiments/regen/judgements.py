"""Regeneration's judgement unit for `judgeloop diff`: the evaluator's judgement of one answer of
one row, at one attempt (iteration 0 the original, n the n-th regeneration), on two metrics:

    quality     the 1-5 quality grade on 0-1, as the policy reads it; its verdict is the policy's
                own: a quality at or above `regenerate.threshold` passes (no regeneration), below it
                fails; an unscored evaluation fails only where `regenerate.unscored_triggers` says so
    confidence  the evaluator's 1-5 confidence on 0-1; no verdict

Both are read from the same evaluator call (and its re-asks). The input judged is the answer's
text, so that a regeneration written otherwise (its feedback moved, or its generator) is blamed on
the input, not on the evaluator. The regenerate stage's results hold every attempt (the original
first); where it has not run, the evaluate stage's originals are attempt 0.

With regen_evaluate.samples > 1 quality carries each sample's quality, and `diff` reports the
evaluator's stability from them; the share of samples straddling the threshold is not given, since
the policy fails a quality below it, where that share counts a score at or below it as failing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from pipeline.data.jsonl import read_jsonl
from pipeline.experiments.judgements import Judgement, RunFiles, text_id
from pipeline.experiments.regen.params import RegenParams
from pipeline.judges.quality.results import EvaluatedAnswer
from pipeline.loops.regenerate import Regeneration

DESIGN = "regen"


def _verdict(params: RegenParams, quality: float | None) -> bool | None:
    policy = params.regenerate
    if quality is None:
        return False if policy.unscored_triggers else None
    return quality >= policy.threshold


def _of_attempt(
    params: RegenParams, item: str, attempt: int, evaluated: EvaluatedAnswer
) -> Iterator[Judgement]:
    judged = text_id(evaluated.answer.text)
    keys = evaluated.calls.keys
    quality, confidence = evaluated.quality, evaluated.confidence
    samples = evaluated.samples or ()
    yield Judgement(
        DESIGN, item, attempt, "quality", quality, _verdict(params, quality), keys, judged, samples=samples
    )
    yield Judgement(DESIGN, item, attempt, "confidence", confidence, None, keys, judged)


def _attempts(params: RegenParams, run: RunFiles) -> Iterable[tuple[str, tuple[EvaluatedAnswer, ...]]]:
    regenerated = run.path(params.regenerate.out)
    if regenerated.is_file():
        return ((r.item, r.attempts) for r in read_jsonl(regenerated, Regeneration))
    evaluated = run.path(params.regen_evaluate.out)
    if evaluated.is_file():
        return ((e.item, (e,)) for e in read_jsonl(evaluated, EvaluatedAnswer))
    return ()


def judgements(params: RegenParams, run: RunFiles) -> Iterator[Judgement]:
    for item, attempts in _attempts(params, run):
        for attempt, evaluated in enumerate(attempts):
            yield from _of_attempt(params, item, attempt, evaluated)
