"""`judgeloop diff`'s interval for the mean change with few items: the percentile bootstrap covers
a 95% interval's mean far less often than 95% below ten or so items, so up to 15 items the diff
gives an exact interval (the subset means', Hartigan 1969: exact where each item's change is
symmetric about the same centre), and with fewer than 6 items, where no exact 95% interval exists,
says so rather than print one.

Checked against a brute-force enumeration of the subset means, and by the coverage itself: every
sample of n items from a discrete symmetric distribution enumerated with its probability."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.experiments.judgements import Judgement
from pipeline.stats.paired import Interval, fewest_items, mean_interval, paired_bootstrap, symmetric_interval
from pipeline.tools.diff.runs import Run
from pipeline.tools.diff.summary import summarise
from pipeline.tools.diff.text import interval


@given(st.lists(st.integers(-4, 4).map(float), min_size=1, max_size=9))
@settings(max_examples=150, deadline=None)
def test_the_exact_interval_is_the_k_th_smallest_and_largest_subset_mean(values: list[float]) -> None:
    found = symmetric_interval(values)
    assert found is not None
    n = len(values)
    k = math.floor(0.025 * 2**n)
    if k == 0:
        assert found.method == "none" and found.low is None and n < fewest_items(0.95) == 6
        return
    means = sorted(
        sum(subset) / len(subset)
        for size in range(1, n + 1)
        for subset in itertools.combinations(values, size)
    )
    assert (found.low, found.high) == pytest.approx((means[k - 1], means[-k]), abs=1e-12)
    assert found.confidence == 1 - 2 * k / 2**n >= 0.95 and found.method == "exact"


def _coverage(n: int, support: list[float], weights: list[float], centre: float, method: str) -> float:
    """The probability that the interval of n items drawn from the distribution holds its centre,
    every multiset of n values enumerated with its multinomial probability."""
    covered = 0.0
    for drawn in itertools.combinations_with_replacement(range(len(support)), n):
        counts = Counter(drawn)
        probability = float(math.factorial(n))
        for index, count in counts.items():
            probability *= weights[index] ** count / math.factorial(count)
        values = [support[i] for i in drawn]
        found: Interval | None
        if method == "bootstrap":
            found = paired_bootstrap([[v] for v in values], resamples=400, seed=0)
        else:
            found = mean_interval(values)
        assert found is not None and found.low is not None and found.high is not None
        covered += probability * (found.low <= centre <= found.high)
    return covered


SYMMETRIC = [  # (support, weights, centre): differences of 1-5 scores, symmetric about their centre
    ([-1.0, 0.0, 1.0], [0.25, 0.5, 0.25], 0.0),
    ([-2.0, -1.0, 0.0, 1.0, 2.0], [0.1, 0.2, 0.4, 0.2, 0.1], 0.0),
    ([0.0, 1.0, 2.0, 3.0], [0.1, 0.4, 0.4, 0.1], 1.5),
]


@pytest.mark.parametrize("n", [6, 7, 9, 12])
@pytest.mark.parametrize(("support", "weights", "centre"), SYMMETRIC)
def test_the_exact_interval_covers_at_least_95_percent(
    n: int, support: list[float], weights: list[float], centre: float
) -> None:
    assert _coverage(n, support, weights, centre, "exact") >= 0.95


def test_the_percentile_bootstrap_it_replaces_covers_less_with_few_items() -> None:
    # What the diff printed before: with 6 items of a symmetric difference, a "95% CI" that holds
    # the mean 89% of the time (and 92% with 9 items; the exact interval: 99.9% and 99.4%).
    support, weights, centre = SYMMETRIC[0]
    assert _coverage(6, support, weights, centre, "bootstrap") < 0.9


def _runs(differences: list[float]) -> tuple[Run, Run]:
    def judged(name: str, shift: bool) -> Run:
        made = [
            Judgement("paper", str(i), 0, "accuracy", 3.0 + (d if shift else 0.0), None)
            for i, d in enumerate(differences)
        ]
        return Run(name, {j.pair_key: j for j in made}, {})

    return judged("A", False), judged("B", True)


def test_the_diff_gives_few_items_an_exact_interval_or_none() -> None:
    rows, _ = summarise(*_runs([1.0, 0.0, 0.0, 2.0, 1.0, 1.0]), resamples=200)
    mean = rows[0].rounds[0].mean
    assert mean is not None and mean.method == "exact"
    assert interval(mean) == "mean B−A +0.833, 96.9% CI [+0.000, +2.000] (exact if symmetric; 6 items)"
    rows, _ = summarise(*_runs([1.0, 0.0, 2.0]), resamples=200)
    assert (
        interval(rows[0].rounds[0].mean)
        == "mean B−A +1.000 over 3 items: too few for a 95% interval (6 needed)"
    )


def test_past_fifteen_items_the_interval_is_the_bootstrap_s() -> None:
    rows, _ = summarise(*_runs([float(i % 3) for i in range(16)]), resamples=200, seed=4)
    mean = rows[0].rounds[0].mean
    assert mean is not None and (mean.method, mean.items, mean.resamples, mean.seed) == (
        "bootstrap",
        16,
        200,
        4,
    )
    assert interval(mean).endswith("(bootstrap over 16 items, 200 resamples, seed 4)")
