"""The agreement statistics against scipy and against answers known by hand."""

from __future__ import annotations

import math
from itertools import product

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from pipeline.stats.bootstrap import group_resamples
from pipeline.stats.classification import (
    _resampled_rows,
    auroc,
    auroc_estimate,
    balanced_accuracy,
    held_out_balanced_accuracy,
)
from pipeline.stats.correlation import LEVELS, STATISTICS, Pair, average_ranks, correlate, correlation
from pipeline.stats.reliability import judge_human_alpha, ordinal_alpha


def pairs_from(rows: list[tuple[str, str, float, float]]) -> list[Pair]:
    return [Pair(f"{g}/{s}", g, s, judge, human) for g, s, judge, human in rows]


# --- one coefficient ----------------------------------------------------------------------------


@pytest.mark.parametrize("statistic", STATISTICS)
def test_perfect_agreement_is_1_and_reversed_order_is_minus_1(statistic: str) -> None:
    x = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert correlation(statistic, x, [2 * v + 1 for v in x]) == pytest.approx(1.0)  # type: ignore[arg-type]
    assert correlation(statistic, x, x[::-1]) == pytest.approx(-1.0)  # type: ignore[arg-type]


def test_ties_kendall_is_tau_b_and_spearman_uses_average_ranks() -> None:
    x, y = [1.0, 2.0, 3.0, 4.0], [1.0, 1.0, 2.0, 2.0]
    # tau-b by hand: 4 concordant pairs, 0 discordant, 6 pairs, 2 tied in y: 4 / sqrt(6 * 4).
    assert correlation("kendall", x, y) == pytest.approx(4 / math.sqrt(24))
    assert correlation("kendall", x, y) == pytest.approx(stats.kendalltau(x, y, variant="b").statistic)
    ranks_y = [1.5, 1.5, 3.5, 3.5]
    assert correlation("spearman", x, y) == pytest.approx(stats.pearsonr(x, ranks_y).statistic)
    assert correlation("pearson", x, y) == pytest.approx(stats.pearsonr(x, y).statistic)


@pytest.mark.parametrize("statistic", STATISTICS)
def test_a_constant_side_has_no_correlation(statistic: str) -> None:
    assert math.isnan(correlation(statistic, [3.0, 3.0, 3.0], [1.0, 2.0, 3.0]))  # type: ignore[arg-type]
    assert math.isnan(correlation(statistic, [1.0, 2.0, 3.0], [2.0, 2.0, 2.0]))  # type: ignore[arg-type]
    assert math.isnan(correlation(statistic, [1.0], [1.0]))  # type: ignore[arg-type]


# --- the three levels ---------------------------------------------------------------------------

# Group a: judge agrees in part; b: reversed; c: constant judge; d: constant humans; e: one item.
ROWS = [
    ("a", "s1", 1.0, 1.0), ("a", "s2", 3.0, 2.0), ("a", "s3", 2.0, 4.0), ("a", "s4", 4.0, 3.0),
    ("b", "s1", 4.0, 1.0), ("b", "s2", 3.0, 2.0), ("b", "s3", 2.0, 3.0), ("b", "s4", 1.0, 4.0),
    ("c", "s1", 2.0, 1.0), ("c", "s2", 2.0, 5.0), ("c", "s3", 2.0, 3.0),
    ("d", "s1", 1.0, 3.0), ("d", "s2", 5.0, 3.0), ("d", "s4", 2.0, 3.0),
    ("e", "s1", 5.0, 5.0),
]  # fmt: skip


@pytest.mark.parametrize("statistic", STATISTICS)
def test_summary_level_averages_groups_and_skips_constant_ones(statistic: str) -> None:
    result = correlate(pairs_from(ROWS), resamples=50, seed=1)["summary"]
    a = correlation(statistic, [1, 3, 2, 4], [1, 2, 4, 3])  # type: ignore[arg-type]
    assert result.estimates[statistic].value == pytest.approx((a + -1.0) / 2)  # type: ignore[index]
    assert result.units == 2
    assert dict(result.skipped) == {
        "fewer than 2 items": 1,
        "constant judge scores": 1,
        "constant human ratings": 1,
    }


@pytest.mark.parametrize("statistic", STATISTICS)
def test_system_level_correlates_the_system_means(statistic: str) -> None:
    result = correlate(pairs_from(ROWS), resamples=50, seed=1)["system"]
    judge, human = {}, {}
    for system in ("s1", "s2", "s3", "s4"):
        judge[system] = np.mean([j for _, s, j, _ in ROWS if s == system])
        human[system] = np.mean([h for _, s, _, h in ROWS if s == system])
    expected = correlation(statistic, list(judge.values()), list(human.values()))  # type: ignore[arg-type]
    assert result.estimates[statistic].value == pytest.approx(expected)  # type: ignore[index]
    assert result.units == 4


def test_global_level_is_scipy_over_all_pairs() -> None:
    result = correlate(pairs_from(ROWS), resamples=50, seed=1)["global"]
    judge, human = [r[2] for r in ROWS], [r[3] for r in ROWS]
    assert result.estimates["spearman"].value == pytest.approx(stats.spearmanr(judge, human).statistic)
    assert result.estimates["kendall"].value == pytest.approx(stats.kendalltau(judge, human).statistic)
    assert result.estimates["pearson"].value == pytest.approx(stats.pearsonr(judge, human).statistic)
    assert result.units == len(ROWS)


def synthetic(noise: float, seed: int = 7) -> list[Pair]:
    rng = np.random.default_rng(seed)
    rows = []
    for g, s in product(range(20), range(6)):
        human = float(rng.integers(1, 6)) + s / 2
        rows.append((f"g{g}", f"s{s}", human + rng.normal(0, noise), human))
    return pairs_from(rows)


def test_bootstrap_is_reproducible_with_its_seed_and_changes_with_another() -> None:
    pairs = synthetic(noise=1.0)
    first = correlate(pairs, resamples=200, seed=11)
    assert correlate(pairs, resamples=200, seed=11) == first
    other = correlate(pairs, resamples=200, seed=12)
    assert other["global"].estimates["spearman"].low != first["global"].estimates["spearman"].low
    assert other["global"].estimates["spearman"].value == first["global"].estimates["spearman"].value


def test_intervals_hold_the_estimate_and_narrow_with_agreement() -> None:
    noisy, clean = correlate(synthetic(2.0), seed=3), correlate(synthetic(0.2), seed=3)
    for level in LEVELS:
        for statistic in STATISTICS:
            estimate = noisy[level].estimates[statistic]
            assert estimate.low <= estimate.value <= estimate.high
            tight = clean[level].estimates[statistic]
            assert tight.high - tight.low < estimate.high - estimate.low


# --- Krippendorff's alpha -----------------------------------------------------------------------


def test_alpha_reproduces_krippendorffs_own_example() -> None:
    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability", the 4 coders x 12 units
    # example with missing values: ordinal alpha = 0.815.
    coders = [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
        [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
    ]
    units = [tuple(coder[u] for coder in coders) for u in range(12)]
    assert ordinal_alpha(units) == pytest.approx(0.815, abs=5e-4)


def test_alpha_of_a_judge_equal_to_the_humans_is_1_and_undefined_when_constant() -> None:
    assert judge_human_alpha([1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0]) == pytest.approx(1.0)
    assert judge_human_alpha([1.0, 2.0, 3.0, 4.0], [4.0, 3.0, 2.0, 1.0]) < 0
    assert math.isnan(ordinal_alpha([(3.0, 3.0), (3.0, 3.0)]))


# --- binary labels ------------------------------------------------------------------------------


def test_auroc_counts_pairs_and_half_ties() -> None:
    # Positives 0.35 and 0.8 against negatives 0.1 and 0.4: 3 of the 4 pairs ranked right.
    assert auroc([0.1, 0.4, 0.35, 0.8], [False, False, True, True]) == pytest.approx(0.75)
    assert auroc([0.5, 0.5], [True, False]) == pytest.approx(0.5)
    assert auroc([0.9, 0.1], [False, True]) == pytest.approx(0.0)
    assert math.isnan(auroc([0.1, 0.2], [True, True]))


def test_auroc_interval_is_reproducible() -> None:
    rng = np.random.default_rng(5)
    labels = [bool(v) for v in rng.integers(0, 2, 80)]
    scores = [float(v) + rng.normal(0, 0.8) for v in labels]
    first = auroc_estimate(scores, labels, resamples=300, seed=2)
    assert first == auroc_estimate(scores, labels, resamples=300, seed=2)
    assert 0.5 < first.low <= first.value <= first.high <= 1.0


def test_balanced_accuracy_is_measured_on_the_half_the_threshold_was_not_chosen_on() -> None:
    assert balanced_accuracy([True, False, False, False], [True, True, False, False]) == pytest.approx(0.75)
    rng = np.random.default_rng(9)
    labels = [bool(v) for v in rng.integers(0, 2, 200)]
    separable = [0.8 + 0.1 * rng.random() if y else 0.1 * rng.random() for y in labels]
    result = held_out_balanced_accuracy(separable, labels, resamples=200, seed=4)
    assert result.fit_rows + result.eval_rows == 200
    assert result.balanced_accuracy.value == pytest.approx(1.0)
    assert result == held_out_balanced_accuracy(separable, labels, resamples=200, seed=4)
    noise = [float(v) for v in rng.random(200)]
    chance = held_out_balanced_accuracy(noise, labels, resamples=300, seed=4).balanced_accuracy
    assert chance.low < 0.5 < chance.high


def test_groups_never_straddle_the_halves() -> None:
    groups = [f"doc{i // 4}" for i in range(80)]
    labels = [i % 2 == 0 for i in range(80)]
    scores = [float(i % 2) for i in range(80)]
    result = held_out_balanced_accuracy(scores, labels, groups=groups, resamples=50, seed=1)
    assert result.fit_rows % 4 == 0 and result.eval_rows % 4 == 0


@given(
    st.lists(st.tuples(st.integers(0, 8), st.booleans()), min_size=2, max_size=40),
    st.sampled_from([1.0, 2.0, 3.0, 10.0]),
)
def test_auroc_is_scipys_mann_whitney_u_exactly(rows: list[tuple[int, bool]], scale: float) -> None:
    scores = [value / scale for value, _ in rows]
    labels = [label for _, label in rows]
    positive = [s for s, flag in zip(scores, labels, strict=True) if flag]
    negative = [s for s, flag in zip(scores, labels, strict=True) if not flag]
    if not positive or not negative:
        assert math.isnan(auroc(scores, labels))
        return
    u = stats.mannwhitneyu(positive, negative, alternative="two-sided").statistic
    assert auroc(scores, labels) == float(u) / float(len(positive) * len(negative))  # to the last bit


def test_auroc_of_a_missing_score_is_nan_as_scipy_gives_it() -> None:
    assert math.isnan(auroc([1.0, math.nan, 3.0, 2.0], [True, True, False, False]))


@given(st.lists(st.integers(0, 5), min_size=1, max_size=25), st.integers(0, 2**16))
def test_resampled_rows_are_each_units_rows_tiled_in_unit_order(units: list[int], seed: int) -> None:
    unit = np.unique(np.asarray(units), return_inverse=True)[1].astype(np.int64)
    n_units = int(unit.max()) + 1
    members = [np.flatnonzero(unit == u) for u in range(n_units)]
    resamples = group_resamples(n_units, 5, seed)
    for counts, rows in zip(resamples, _resampled_rows(members, resamples), strict=True):
        tiled = np.concatenate([np.tile(members[u], int(c)) for u, c in enumerate(counts.tolist()) if c])
        assert rows.dtype == np.int64 and rows.tolist() == tiled.tolist()


@given(
    st.lists(st.tuples(st.integers(0, 6), st.floats(-3, 3, allow_nan=False)), min_size=3, max_size=50),
    st.sampled_from([1.0, 3.0, 7.0]),
)
def test_spearman_and_kendall_are_scipys_to_the_last_bit(rows: list[tuple[int, float]], scale: float) -> None:
    a = np.array([x / scale for x, _ in rows])
    b = np.array([y for _, y in rows])
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return
    assert average_ranks(a).tolist() == stats.rankdata(a).tolist()
    assert correlation("spearman", a, b) == float(stats.spearmanr(a, b).statistic)
    assert correlation("kendall", a, b) == float(stats.kendalltau(a, b, variant="b").statistic)
    assert correlation("pearson", a, b) == float(stats.pearsonr(a, b).statistic)


@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=2, max_size=60), st.integers(0, 2**16))
def test_pearson_is_scipys_to_the_last_bit(values: list[float], seed: int) -> None:
    a = np.array(values)
    b = np.random.default_rng(seed).normal(size=a.size) * (1 + seed % 5) + a * (seed % 3)
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return
    assert correlation("pearson", a, b) == float(stats.pearsonr(a, b).statistic)


@given(
    st.lists(
        st.tuples(
            st.one_of(st.integers(-3, 3).map(float), st.floats(-1e300, 1e300, allow_nan=False)),
            st.one_of(st.integers(0, 2).map(float), st.floats(-1e-300, 1e-300, allow_nan=False)),
        ),
        min_size=2,
        max_size=80,
    )
)
def test_kendall_tau_b_counted_pairwise_is_scipys_to_the_last_bit(rows: list[tuple[float, float]]) -> None:
    a, b = np.array([x for x, _ in rows]), np.array([y for _, y in rows])
    if np.ptp(a) == 0 or np.ptp(b) == 0 or not np.isfinite(np.ptp(a)):
        return
    assert correlation("kendall", a, b) == float(stats.kendalltau(a, b, variant="b").statistic)
