"""Paired statistics for two runs' judgements of the same items (`judgeloop diff`).

Written with the standard library and numpy, and checked against scipy on the same pairs
(tests/test_paired_stats.py): the Wilcoxon signed-rank test on the score differences (zero
differences dropped, no continuity correction; when at most 50 differences remain, the exact null
distribution of the signed ranks as ranked, ties given their mean rank: 1-5 scores tie almost
always, and the normal approximation scipy falls back to there reports p = 0.102 for three equal
differences, whose smallest possible p is 0.25; past 50, the normal approximation with the tie
correction, as scipy), the
exact McNemar test on pass/fail (a two-sided binomial test of the discordant pairs at 1/2),
quadratic-weighted Cohen's kappa, and an interval for the mean of the items' differences: exact
under symmetry up to EXACT_INTERVAL_UP_TO items (the percentile bootstrap is too narrow there),
past it a paired bootstrap that resamples items, seeded so that a rerun gives the same interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.numbers import fsum


@dataclass(frozen=True)
class TestResult:
    """A test's name as printed (which test, which null distribution), its statistic and p-value."""

    name: str
    statistic: float
    p_value: float
    n: int  # the observations the test used (Wilcoxon: nonzero differences; McNemar: discordant pairs)


def average_ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties given the mean of the ranks they span."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


EXACT_UP_TO = 50  # differences; past it the normal approximation is close, and the exact table large


def _exact_signed_rank_p(ranks: Sequence[float], statistic: float) -> float:
    """Two-sided p of the signed-rank statistic min(W+, W-) under H0, from the exact distribution of
    W+: each rank in the sum with probability 1/2, independently. Ranks are whole or, tied, halves,
    so the distribution is counted over doubled ranks, exactly (floats of k / 2^n); tied ranks
    included, this is the permutation test of the signs given the ranks."""
    doubled = [round(2 * rank) for rank in ranks]
    probability = np.zeros(sum(doubled) + 1)
    probability[0] = 1.0
    for rank in doubled:
        shifted = np.zeros_like(probability)
        shifted[rank:] = probability[: len(probability) - rank]
        probability = (probability + shifted) / 2
    at_most = float(np.sum(probability[: round(2 * statistic) + 1]))
    return min(1.0, 2 * at_most)


def wilcoxon_signed_rank(differences: Sequence[float]) -> TestResult | None:
    """The two-sided Wilcoxon signed-rank test of `differences` (B - A); None when every
    difference is zero (nothing to test)."""
    nonzero = [d for d in differences if d != 0]
    n = len(nonzero)
    if n == 0:
        return None
    ranks = average_ranks([abs(d) for d in nonzero])
    plus = sum(r for r, d in zip(ranks, nonzero, strict=True) if d > 0)
    minus = sum(r for r, d in zip(ranks, nonzero, strict=True) if d < 0)
    statistic = min(plus, minus)
    if n <= EXACT_UP_TO:
        exact = _exact_signed_rank_p(ranks, statistic)
        return TestResult("Wilcoxon signed-rank (exact)", statistic, exact, n)
    mean = n * (n + 1) / 4
    # The variance less the ties' share, as scipy computes it.
    _, tie_sizes = np.unique(np.abs(np.asarray(nonzero, dtype=float)), return_counts=True)
    variance = n * (n + 1) * (2 * n + 1) / 24 - float(np.sum(tie_sizes**3 - tie_sizes)) / 48
    if variance <= 0:
        return TestResult("Wilcoxon signed-rank (normal approx.)", statistic, 1.0, n)
    z = (statistic - mean) / math.sqrt(variance)
    p = math.erfc(abs(z) / math.sqrt(2))
    return TestResult("Wilcoxon signed-rank (normal approx.)", statistic, min(1.0, p), n)


def mcnemar_exact(a_only: int, b_only: int) -> TestResult:
    """The exact McNemar test: of the pairs that disagree on pass/fail, `a_only` pass in A alone and
    `b_only` in B alone; two-sided binomial test of a_only among them at 1/2."""
    n = a_only + b_only
    if n == 0:
        return TestResult("exact McNemar", 0.0, 1.0, 0)
    low = min(a_only, b_only)
    tail = sum(math.comb(n, k) for k in range(low + 1)) / 2**n
    return TestResult("exact McNemar", float(a_only), min(1.0, 2 * tail), n)


def quadratic_kappa(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Cohen's kappa with quadratic weights (x - y)^2 on the score values themselves, so a scale's
    unused values still count as distance; None when undefined (no pairs, or no spread to expect
    disagreement from)."""
    if not a:
        return None
    values = sorted(set(a) | set(b))
    index = {v: i for i, v in enumerate(values)}
    k = len(values)
    observed = np.zeros((k, k))
    for x, y in zip(a, b, strict=True):
        observed[index[x], index[y]] += 1
    observed /= len(a)
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    grid = np.asarray(values, dtype=float)
    weights = (grid[:, None] - grid[None, :]) ** 2
    disagreement_expected = float(np.sum(weights * expected))
    if disagreement_expected == 0:
        return None
    return 1 - float(np.sum(weights * observed)) / disagreement_expected


def exact_agreement(a: Sequence[float], b: Sequence[float]) -> float | None:
    return sum(x == y for x, y in zip(a, b, strict=True)) / len(a) if a else None


@dataclass(frozen=True)
class Interval:
    """The mean of the items' differences and an interval for it, by `method`: "bootstrap" (the
    percentile interval of resampled items), "exact" (the subset means', under symmetry), or "none"
    (too few items for an interval at `confidence`: low and high None). `confidence`: the nominal
    level for the bootstrap; for the exact interval, the coverage it reaches (at least the asked)."""

    estimate: float
    low: float | None
    high: float | None
    confidence: float
    method: str
    items: int  # the units: how far an interval can be trusted
    resamples: int = 0
    seed: int | None = None


def _item_means(differences_by_item: Sequence[Sequence[float]]) -> list[float]:
    return [fsum(g) / len(g) for g in differences_by_item if g]  # fsum: 3.12's sum() rounds otherwise


def paired_bootstrap(
    differences_by_item: Sequence[Sequence[float]],
    *,
    resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> Interval | None:
    """The mean of the items' mean differences (each item counted once, as the tests count it), and
    its percentile interval from resampling items with replacement; seeded: the same pairs give the
    same interval. Below EXACT_INTERVAL_UP_TO items it is too narrow (mean_interval says which to use)."""
    means = _item_means(differences_by_item)
    if not means:
        return None
    values = np.asarray(means, dtype=float)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(values), size=(resamples, len(values)))
    resampled = values[picks].mean(axis=1)
    tail = (1 - confidence) / 2
    low, high = np.quantile(resampled, [tail, 1 - tail])
    estimate = fsum(means) / len(means)
    return Interval(estimate, float(low), float(high), confidence, "bootstrap", len(means), resamples, seed)


# Items up to which the interval is exact (2^15 subset means): the percentile bootstrap's 95%
# interval holds the mean of a symmetric 1-5 difference 88-93% of the time with 6 items, 91-94% with
# 8 to 12 (bench/diff_intervals.py, enumerated); the exact one at least 95% where its assumption holds.
EXACT_INTERVAL_UP_TO = 15


def symmetric_interval(values: Sequence[float], confidence: float = 0.95) -> Interval | None:
    """An exact interval for the centre of `values` (each item's difference), assuming only that
    they are independent and each symmetric about the same centre (Hartigan 1969): the 2^n - 1
    means of the nonempty subsets cut the line into 2^n pieces, each as likely to hold the centre;
    from the k-th smallest to the k-th largest it is held with probability 1 - 2k / 2^n, the largest
    k that keeps that at least `confidence` (ties, as 1-5 scores make them, only widen it). Fewer
    than log2(2 / (1 - confidence)) items (6 at 95%): no k, no interval ("none")."""
    if not values:
        return None
    n = len(values)
    estimate = fsum(values) / n
    k = math.floor((1 - confidence) / 2 * 2**n)
    if k == 0:
        return Interval(estimate, None, None, confidence, "none", n)
    sums, sizes = np.zeros(1), np.zeros(1, dtype=np.int64)
    for value in values:
        sums = np.concatenate([sums, sums + value])
        sizes = np.concatenate([sizes, sizes + 1])
    means = np.sort(sums[1:] / sizes[1:])
    reached = 1 - 2 * k / 2**n
    return Interval(estimate, float(means[k - 1]), float(means[-k]), reached, "exact", n)


def fewest_items(confidence: float = 0.95) -> int:
    """The fewest items with an exact interval at `confidence`: 2 / 2^n at most 1 - confidence."""
    return math.ceil(math.log2(2 / (1 - confidence)) - 1e-12)


def mean_interval(
    item_differences: Sequence[float], *, resamples: int = 2000, seed: int = 0, confidence: float = 0.95
) -> Interval | None:
    """The mean of the items' differences (one per item) with the interval that fits their number:
    one item, none; up to EXACT_INTERVAL_UP_TO, the exact one (or none where too few for it);
    more, the percentile bootstrap over items."""
    if len(item_differences) == 1:
        return Interval(item_differences[0], None, None, confidence, "none", 1)
    if len(item_differences) <= EXACT_INTERVAL_UP_TO:
        return symmetric_interval(item_differences, confidence)
    return paired_bootstrap(
        [[d] for d in item_differences], resamples=resamples, seed=seed, confidence=confidence
    )


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of `p_values` (in their order): each family-wise p-value, so that
    any rejected at a level keeps the chance of one false alarm among all at that level."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for position, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - position) * p_values[index]))
        adjusted[index] = running
    return adjusted
