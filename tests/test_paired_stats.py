"""pipeline.stats.paired against scipy on the same pairs (Wilcoxon signed-rank, the exact McNemar
test as scipy's binomial test), quadratic-weighted kappa against its textbook formula, and the
paired bootstrap: seeded, so the same pairs give the same interval."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from pipeline.stats.paired import (
    exact_agreement,
    holm,
    mcnemar_exact,
    paired_bootstrap,
    quadratic_kappa,
    wilcoxon_signed_rank,
)


def _scipy_wilcoxon(differences: list[float], method: str) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(
            stats.wilcoxon(differences, zero_method="wilcox", correction=False, method=method).pvalue
        )


@given(st.lists(st.integers(-40, 40).filter(lambda d: d != 0), min_size=1, max_size=30, unique_by=abs))
@settings(max_examples=150, deadline=None)
def test_wilcoxon_exact_equals_scipy_without_ties(differences: list[int]) -> None:
    ours = wilcoxon_signed_rank([float(d) for d in differences])
    assert ours is not None and ours.name == "Wilcoxon signed-rank (exact)"
    assert ours.p_value == pytest.approx(_scipy_wilcoxon([float(d) for d in differences], "exact"), rel=1e-9)


def _signs_enumerated(differences: list[float]) -> float:
    """The two-sided p of min(W+, W-) over all 2^n sign patterns of the midranks, by brute force:
    the permutation test of the signs given the ranks, ties and all."""
    nonzero = [d for d in differences if d != 0]
    ranks = [float(r) for r in stats.rankdata([abs(d) for d in nonzero])]  # midranks
    plus = sum(r for r, d in zip(ranks, nonzero, strict=True) if d > 0)
    observed = min(plus, sum(ranks) - plus)
    hits = sum(
        1
        for signs in itertools.product((0, 1), repeat=len(ranks))
        if sum(r for r, s in zip(ranks, signs, strict=True) if s) <= observed + 1e-9
    )
    return min(1.0, 2 * hits / float(2 ** len(ranks)))


@given(st.lists(st.integers(-4, 4), min_size=1, max_size=14))
@settings(max_examples=200, deadline=None)
def test_wilcoxon_with_ties_or_zeros_is_the_exact_sign_permutation_test(differences: list[int]) -> None:
    ours = wilcoxon_signed_rank([float(d) for d in differences])
    if not any(differences):
        assert ours is None  # nothing to test
        return
    assert ours is not None and ours.name.endswith("(exact)")
    assert ours.p_value == pytest.approx(_signs_enumerated([float(d) for d in differences]), rel=1e-9)


def test_three_equal_differences_are_never_significant() -> None:
    """Three differences of +1 (a 1-5 judge moved one point on three items): every sign pattern is
    as likely, so p = 2/8. The normal approximation said 0.102, below any pattern's."""
    ours = wilcoxon_signed_rank([1.0, 1.0, 1.0])
    assert ours is not None and ours.p_value == pytest.approx(0.25)
    six = wilcoxon_signed_rank([1.0] * 6)
    assert six is not None and six.p_value == pytest.approx(2 / 64)


@given(st.lists(st.integers(-4, 4), min_size=1, max_size=160))
@settings(max_examples=150, deadline=None)
def test_wilcoxon_past_50_differences_equals_scipy_normal_approximation(differences: list[int]) -> None:
    nonzero = [d for d in differences if d != 0]
    ours = wilcoxon_signed_rank([float(d) for d in differences])
    if len(nonzero) <= 50:
        assert ours is None or ours.name.endswith("(exact)")
        return
    assert ours is not None and ours.name.endswith("(normal approx.)")
    theirs = stats.wilcoxon(
        [float(d) for d in differences], zero_method="wilcox", correction=False, method="approx"
    )
    assert ours.statistic == pytest.approx(float(theirs.statistic))
    if not math.isnan(theirs.pvalue):
        assert ours.p_value == pytest.approx(float(theirs.pvalue), rel=1e-9, abs=1e-12)


@given(st.integers(0, 60), st.integers(0, 60))
def test_exact_mcnemar_is_scipys_binomial_test_of_the_discordant_pairs(a_only: int, b_only: int) -> None:
    ours = mcnemar_exact(a_only, b_only)
    if a_only + b_only == 0:
        assert ours.p_value == 1.0
        return
    theirs = stats.binomtest(a_only, a_only + b_only, 0.5).pvalue
    assert ours.p_value == pytest.approx(theirs, rel=1e-9)


def _kappa_by_hand(a: list[int], b: list[int]) -> float:
    """Cohen (1968): 1 - sum w_ij o_ij / sum w_ij e_ij, w_ij = (i - j)^2 over the values, o the
    observed proportions, e the product of the margins; written out with loops."""
    values = sorted(set(a) | set(b))
    n = len(a)
    observed = {(x, y): 0.0 for x in values for y in values}
    for x, y in zip(a, b, strict=True):
        observed[(x, y)] += 1 / n
    row = {x: sum(observed[(x, y)] for y in values) for x in values}
    col = {y: sum(observed[(x, y)] for x in values) for y in values}
    num = sum((x - y) ** 2 * observed[(x, y)] for x in values for y in values)
    den = sum((x - y) ** 2 * row[x] * col[y] for x in values for y in values)
    return 1 - num / den


@given(st.lists(st.tuples(st.integers(1, 5), st.integers(1, 5)), min_size=2, max_size=60))
def test_quadratic_kappa_is_the_textbook_formula(pairs: list[tuple[int, int]]) -> None:
    a, b = [x for x, _ in pairs], [y for _, y in pairs]
    ours = quadratic_kappa([float(x) for x in a], [float(y) for y in b])
    if len(set(a) | set(b)) == 1:
        assert ours is None  # no spread: kappa is undefined
        return
    expected = _kappa_by_hand(a, b)
    assert ours == pytest.approx(expected, abs=1e-12)


def test_quadratic_kappa_and_agreement_on_a_known_table() -> None:
    a = [1.0, 2, 3, 4, 5, 5]
    assert quadratic_kappa(a, a) == pytest.approx(1.0)
    assert exact_agreement(a, a) == 1.0
    assert exact_agreement(a, [1.0, 2, 3, 4, 5, 4]) == pytest.approx(5 / 6)
    # Fully reversed on a symmetric scale: as far from agreement as the margins allow.
    assert quadratic_kappa([1.0, 5.0], [5.0, 1.0]) == pytest.approx(-1.0)


def test_the_bootstrap_is_seeded_and_resamples_items_not_pairs() -> None:
    rng = np.random.default_rng(3)
    groups = [list(rng.integers(-2, 3, size=int(rng.integers(1, 4))).astype(float)) for _ in range(25)]
    first = paired_bootstrap(groups, resamples=500, seed=7)
    again = paired_bootstrap(groups, resamples=500, seed=7)
    other = paired_bootstrap(groups, resamples=500, seed=8)
    assert first == again and first is not None and other is not None
    assert (first.low, first.high) != (other.low, other.high)
    # The mean of the items' means: each item counts once, as the signed-rank test counts it.
    assert first.estimate == pytest.approx(sum(sum(g) / len(g) for g in groups) / len(groups))
    assert first.low is not None and first.high is not None
    assert first.low <= first.estimate <= first.high
    # One item: every resample is that item, so the interval has no width.
    single = paired_bootstrap([[1.0, -1.0, 3.0]], resamples=200, seed=0)
    assert single is not None and single.low == single.high == pytest.approx(1.0)
    assert paired_bootstrap([], seed=0) is None


def test_holm_adjusts_each_p_value_for_the_family() -> None:
    # Sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1: 0.02, 0.03, 0.06, 0.04 -> running max.
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == [1.0, 1.0] and holm([]) == []


@given(st.lists(st.floats(0, 1), max_size=12))
def test_holm_is_the_step_down_maximum_monotone_and_capped(p_values: list[float]) -> None:
    # Holm (1979): the i-th smallest of m p-values is multiplied by m - i + 1 and the products made
    # non-decreasing in that order; a tie takes its first place's factor; capped at 1.
    def first_place(p: float) -> int:
        return sum(q < p for q in p_values)

    m = len(p_values)
    by_definition = [min(1.0, max((m - first_place(q)) * q for q in p_values if q <= p)) for p in p_values]
    ours = holm(p_values)
    assert ours == pytest.approx(by_definition, rel=1e-12, abs=0)
    assert all(p <= adjusted <= 1.0 for p, adjusted in zip(p_values, ours, strict=True))
    assert all(ours[i] <= ours[j] for i in range(m) for j in range(m) if p_values[i] <= p_values[j])
