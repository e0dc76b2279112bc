"""`judgeloop diff --json`: everything the text says, for scripts: per metric its counts, the
judgements one run alone holds, its statistics (each test's Holm-adjusted p, n in items), and every
changed judgement with its cause and what else moved. Each statistic is written `stated()`
(pipeline.numbers): numpy's sums and quantiles may differ in the last bit between releases and CPU
kernels, and a script comparing two machines' JSON should see the same bytes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipeline.experiments.judgements import Judgement
from pipeline.numbers import stated
from pipeline.stats.paired import TestResult
from pipeline.stats.stability import Stability
from pipeline.tools.diff.summary import Change, MetricDiff


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


def as_json(
    names: Sequence[str],
    rows: Sequence[MetricDiff],
    changes: Sequence[Change],
    unrecorded: Sequence[tuple[int, int]] = ((0, 0), (0, 0)),
) -> dict[str, Any]:
    metrics = []
    for row in rows:
        mean = row.mean
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
                "scored_pairs": row.scored,
                "mean_difference": None
                if mean is None
                else {
                    "estimate": stated(mean.estimate),
                    "low": stated(mean.low),
                    "high": stated(mean.high),
                    "confidence": mean.confidence,
                    "resamples": mean.resamples,
                    "seed": mean.seed,
                    "items": mean.items,
                },
                "score_test": _test_data(row.score_test, row.score_holm),
                "pass_test": _test_data(row.pass_test, row.pass_holm),
                "exact_agreement": _stated(row.agreement),
                "quadratic_kappa": _stated(row.kappa),
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
