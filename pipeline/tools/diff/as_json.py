"""`judgeloop diff --json`: everything the text says, for scripts: per metric its counts, the
judgements one run alone holds, its statistics per round (round 0 apart from the later rounds: each
test's Holm-adjusted p, n in items, the change against the judge's repeat noise), and every
changed judgement with its cause and what else moved. Each statistic is written `stated()`
(pipeline.numbers): numpy's sums and quantiles may differ in the last bit between releases and CPU
kernels, and a script comparing two machines' JSON should see the same bytes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipeline.experiments.judgements import Judgement
from pipeline.numbers import stated
from pipeline.stats.paired import Interval, TestResult
from pipeline.stats.stability import Stability
from pipeline.tools.diff.summary import Change, MetricDiff, RoundDiff
from pipeline.tools.diff.text import INPUTS, NOISE_UNKNOWN


def _judgement_data(judgement: Judgement) -> dict[str, Any]:
    return {
        "score": judgement.score,
        "passed": judgement.passed,
        "keys": list(judgement.keys),
        "upstream": judgement.upstream,
    }


def _stated(value: float | None) -> float | None:
    return None if value is None else stated(value)


def _test_data(result: TestResult | None, adjusted: float | None) -> dict[str, Any] | None:
    if result is None:
        return None
    return {
        "test": result.name,
        "statistic": stated(result.statistic),
        "p_value": stated(result.p_value),
        "p_holm": _stated(adjusted),
        "n": result.n,
        "unit": "item",
    }


def _stability_data(found: Stability) -> dict[str, Any]:
    return {name: value if isinstance(value, int) else _stated(value) for name, value in vars(found).items()}


def _interval_data(mean: Interval | None) -> dict[str, Any] | None:
    if mean is None:
        return None
    return {
        "estimate": stated(mean.estimate),
        "low": _stated(mean.low),
        "high": _stated(mean.high),
        "confidence": stated(mean.confidence),
        "method": mean.method,  # "exact" (under symmetry), "bootstrap", or "none" (too few items)
        "items": mean.items,
        "resamples": mean.resamples,
        "seed": mean.seed,
    }


def _noise_data(part: RoundDiff) -> dict[str, Any] | None:
    """The change against the judge's repeat noise; unmeasured: why and how to measure it."""
    found = part.noise
    if found is None:
        if not part.moved:  # no score moved: nothing to set against the noise
            return None
        return {"measured": False, "why": " ".join(" ".join(NOISE_UNKNOWN).split())}
    return {
        "measured": True,
        "change": stated(found.change),
        "noise_se": stated(found.noise_se),
        "ratio": _stated(found.ratio),  # the change in SEs, signed as it (None: no sample spread)
        "sd_a": _stated(found.sd_a),  # None: A asked each judgement once (taken as noisy as B)
        "sd_b": _stated(found.sd_b),
        "pairs": found.pairs,
        "items": found.items,
        "test": "permutation of the samples",
        "p_value": stated(found.p_value),
        "p_holm": _stated(part.noise_holm),
        "method": found.method,
        "splits": found.splits,  # exact: of the pairs whose samples differ; Monte Carlo: draws
        "seed": found.seed,
    }


def _round_data(part: RoundDiff) -> dict[str, Any]:
    return {
        "round": part.name,  # "0": judged before any revision; "1+": the later rounds
        "iterations": [part.first, part.last],
        "paired": part.paired,
        "changed": part.changed,
        "input": {kind: part.inputs[kind] for kind in INPUTS},
        "scored_pairs": part.scored,
        "mean_difference": _interval_data(part.mean),
        "score_test": _test_data(part.score_test, part.score_holm),
        "pass_test": _test_data(part.pass_test, part.pass_holm),
        "repeat_noise": _noise_data(part),
        "exact_agreement": _stated(part.agreement),
        "quadratic_kappa": _stated(part.kappa),
    }


def as_json(
    names: Sequence[str],
    rows: Sequence[MetricDiff],
    changes: Sequence[Change],
    unrecorded: Sequence[tuple[int, int]] = ((0, 0), (0, 0)),
) -> dict[str, Any]:
    metrics = []
    for row in rows:
        metrics.append(
            {
                "design": row.design,
                "metric": row.metric,
                "paired": row.paired,
                "changed": row.changed,
                "flipped": {"pass_to_fail": row.pass_to_fail, "fail_to_pass": row.fail_to_pass},
                "only_in_a": row.only_a,
                "only_in_b": row.only_b,
                # Which judgements one run alone holds (the loop took another path, an item added).
                "alone": {
                    side: [{"item": j.item, "iteration": j.iteration, **_judgement_data(j)} for j in found]
                    for side, found in row.alone.items()
                },
                # Round 0 and the later rounds apart: their statistics answer different questions.
                "rounds": [_round_data(part) for part in row.rounds],
                "causes": dict(sorted(row.causes.items())),
                "stability": {side: _stability_data(found) for side, found in row.stability.items()},
            }
        )
    return {
        "a": names[0],
        "b": names[1],
        # Per run, the calls its judgements name that its recordings lack.
        "unrecorded_calls": {side: missing for side, (missing, _) in zip("ab", unrecorded, strict=True)},
        "metrics": metrics,
        "changes": [
            {
                "design": c.a.design,
                "item": c.a.item,
                "iteration": c.a.iteration,
                "metric": c.a.metric,
                "a": _judgement_data(c.a),
                "b": _judgement_data(c.b),
                "flip": c.flip,
                "cause": c.cause.kind,
                "detail": c.cause.detail,
                "also": list(c.cause.also),
            }
            for c in changes
        ],
    }
