"""`judgeloop diff` sets the change between two runs against the judge's own repeat noise: where a
run asked each judgement several times (judge.samples > 1), a permutation test of the samples (a
judgement's A and B samples split every way) and the noise's standard error of the change; where
neither did, it says the noise is unknown and how to measure it, never a test it cannot make.

The permutation p is checked against a brute-force enumeration in exact fractions (every split of
every pair), against scipy's permutation test for one pair, and its Monte Carlo branch against the
exact p; the standard error against its formula computed by hand."""

from __future__ import annotations

import itertools
import math
import statistics
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from pipeline.experiments.judgements import Judgement
from pipeline.stats import repeat_noise as noise_module
from pipeline.stats.repeat_noise import SampledPair, repeat_noise
from pipeline.tools.diff.as_json import as_json
from pipeline.tools.diff.runs import Run
from pipeline.tools.diff.summary import summarise
from pipeline.tools.diff.text import render


def _brute_force_p(pairs: list[SampledPair]) -> Fraction:
    """Every split of every pair, the statistic in exact fractions: twice the smaller tail, at most 1."""
    items: dict[str, int] = {}
    for pair in pairs:
        items[pair.item] = items.get(pair.item, 0) + 1
    weights = [Fraction(1, len(items) * items[pair.item]) for pair in pairs]

    def changes(pair: SampledPair) -> list[Fraction]:
        pooled = [Fraction(v) for v in pair.a + pair.b]
        found = []
        for in_a in itertools.combinations(range(len(pooled)), len(pair.a)):
            a = sum((pooled[i] for i in in_a), Fraction(0))
            found.append((sum(pooled, Fraction(0)) - a) / len(pair.b) - a / len(pair.a))
        return found  # the observed split, A's samples first, is combinations' first

    tables = [changes(pair) for pair in pairs]
    observed = sum((w * t[0] for w, t in zip(weights, tables, strict=True)), Fraction(0))
    total = above = below = 0
    for split in itertools.product(*tables):
        value = sum((w * v for w, v in zip(weights, split, strict=True)), Fraction(0))
        total += 1
        above += value >= observed
        below += value <= observed
    return min(Fraction(1), Fraction(2 * min(above, below), total))


samples = st.lists(st.integers(1, 5).map(float), min_size=1, max_size=3)
pairs_strategy = st.lists(
    st.tuples(st.sampled_from("xyz"), samples, samples).filter(lambda t: max(len(t[1]), len(t[2])) >= 2),
    min_size=1,
    max_size=4,
).filter(lambda pairs: math.prod(math.comb(len(a) + len(b), len(a)) for _, a, b in pairs) <= 4096)


@given(pairs_strategy)
@settings(max_examples=150, deadline=None)
def test_the_exact_permutation_p_is_the_brute_force_count(
    drawn: list[tuple[str, list[float], list[float]]],
) -> None:
    pairs = [SampledPair(item, tuple(a), tuple(b)) for item, a, b in drawn]
    found = repeat_noise(pairs)
    assert found is not None and found.method == "exact"
    assert found.p_value == pytest.approx(float(_brute_force_p(pairs)), abs=1e-12)
    # Counted over the pairs whose samples differ: a pair of one score is 0 at every split.
    varied = [p for p in pairs if len(set(p.a + p.b)) > 1]
    assert found.splits == math.prod(math.comb(len(p.a) + len(p.b), len(p.a)) for p in varied)


def test_one_pair_s_p_is_scipy_s_exact_permutation_test() -> None:
    a, b = (1.0, 2.0), (4.0, 5.0, 3.0, 5.0)
    found = repeat_noise([SampledPair("x", a, b)])
    assert found is not None
    expected = stats.permutation_test(
        (b, a), lambda x, y: np.mean(x) - np.mean(y), permutation_type="independent", n_resamples=np.inf
    ).pvalue
    # The observed split (A's 1 and 2) is the one most extreme: one of 15, doubled for two sides.
    assert found.p_value == pytest.approx(expected, abs=1e-12) and found.p_value == 2 / 15


def test_past_the_exact_limit_the_monte_carlo_p_is_near_the_exact_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(5)
    pairs = [
        SampledPair(str(i % 6), (float(rng.integers(1, 4)),), tuple(float(v) for v in rng.integers(2, 6, 3)))
        for i in range(8)
    ]
    exact = repeat_noise(pairs)
    monkeypatch.setattr(noise_module, "EXACT_SPLITS", 10)
    drawn = repeat_noise(pairs, draws=20_000, seed=3)
    assert exact is not None and drawn is not None
    assert (exact.method, drawn.method, drawn.splits) == ("exact", "Monte Carlo", 20_000)
    assert exact.change == pytest.approx(drawn.change, abs=1e-12)
    # Within four of its standard errors (twice a tail's) of the exact p (deterministic: seeded).
    tail = exact.p_value / 2
    assert abs(drawn.p_value - exact.p_value) < 4 * 2 * math.sqrt(tail * (1 - tail) / 20_000)
    assert drawn == repeat_noise(pairs, draws=20_000, seed=3)  # seeded: the same p again


def test_the_noise_standard_error_is_the_pooled_sample_variance_s_formula() -> None:
    # Two items: "x" with two pairs (weights 1/4 each), "y" with one (1/2).
    pairs = [
        SampledPair("x", (1.0, 2.0), (3.0, 3.0, 4.0)),
        SampledPair("x", (2.0, 2.0), (5.0, 4.0, 3.0)),
        SampledPair("y", (3.0, 5.0), (4.0, 4.0, 5.0)),
    ]
    found = repeat_noise(pairs)
    assert found is not None
    var_a = statistics.fmean([0.5, 0.0, 2.0])
    var_b = statistics.fmean([1 / 3, 1.0, 1 / 3])
    se = math.sqrt(sum(w * w * (var_a / 2 + var_b / 3) for w in (0.25, 0.25, 0.5)))
    assert found.noise_se == pytest.approx(se, rel=1e-12)
    assert found.sd_a == pytest.approx(math.sqrt(var_a)) and found.sd_b == pytest.approx(math.sqrt(var_b))
    change = 0.25 * (10 / 3 - 1.5) + 0.25 * (4 - 2) + 0.5 * (13 / 3 - 4)
    assert found.change == pytest.approx(change, rel=1e-12)
    assert found.ratio == pytest.approx(change / se)


def test_a_run_asked_once_is_taken_as_noisy_as_the_other() -> None:
    found = repeat_noise(
        [SampledPair("x", (1.0,), (4.0, 5.0, 3.0)), SampledPair("y", (1.0,), (4.0, 4.0, 4.0))]
    )
    assert found is not None and found.sd_a is None
    var = statistics.fmean([1.0, 0.0])  # B's, taken for A's too
    assert found.noise_se == pytest.approx(math.sqrt(0.25 * 2 * (var / 1 + var / 3)))


def test_asked_once_in_both_runs_the_noise_is_unknown() -> None:
    assert repeat_noise([SampledPair("x", (1.0,), (4.0,)), SampledPair("y", (2.0,), (5.0,))]) is None


def _run(name: str, scores: dict[str, tuple[float, ...]]) -> Run:
    judged = [
        Judgement(
            "paper", item, 0, "accuracy", round(sum(s) / len(s), 6), None, samples=s if len(s) > 1 else ()
        )
        for item, s in scores.items()
    ]
    return Run(name, {j.pair_key: j for j in judged}, {})


def test_the_diff_says_whether_the_change_exceeds_the_judge_s_repeat_noise() -> None:
    # A asked once per judgement (temperature 0), B three times: B's spread is the noise measured.
    a = _run("A", {str(i): (1.0,) for i in range(3)})
    b = _run("B", {"0": (5.0, 4.0, 5.0), "1": (4.0, 4.0, 4.0), "2": (5.0, 3.0, 4.0)})
    rows, changes = summarise(a, b, resamples=200)
    (part,) = rows[0].rounds
    assert part.noise is not None and part.noise.method == "exact" and part.noise.splits == 4**3
    # Only the observed split (A's 1 the lowest of each pair's four) is as high: p = 2 * 1/64.
    assert part.noise.p_value == 2 / 64
    assert part.noise_holm == min(1.0, 2 * 2 / 64)  # the family: this and the signed-rank test
    shown = render(["A", "B"], rows, changes)
    assert "repeat noise: SE ±" in shown and "A asked once, assumed alike" in shown
    assert "samples permuted: p = 0.031, Holm 0.062 (exact, 64 splits)" in shown
    assert all(len(line) <= 100 for line in shown.splitlines())
    (metric,) = as_json(["A", "B"], rows, changes)["metrics"]
    noise = metric["rounds"][0]["repeat_noise"]
    assert noise["measured"] is True and noise["sd_a"] is None and noise["p_value"] == 2 / 64
    assert noise["method"] == "exact" and noise["splits"] == 64 and noise["p_holm"] == 4 / 64


def test_asked_once_in_both_runs_the_diff_says_the_noise_is_unknown_and_how_to_measure_it() -> None:
    a = _run("A", {str(i): (1.0,) for i in range(3)})
    b = _run("B", {str(i): (4.0,) for i in range(3)})
    rows, changes = summarise(a, b, resamples=200)
    (part,) = rows[0].rounds
    assert part.noise is None and part.noise_holm is None
    shown = render(["A", "B"], rows, changes)
    assert "repeat noise: unknown (each judgement asked once in both runs)" in shown
    assert "judge.samples: 3" in shown and "temperature above 0" in shown
    assert "samples permuted" not in shown
    (metric,) = as_json(["A", "B"], rows, changes)["metrics"]
    noise = metric["rounds"][0]["repeat_noise"]
    assert noise["measured"] is False and "judge.samples: 3" in noise["why"]


@given(pairs_strategy)
@settings(max_examples=100, deadline=None)
def test_a_pair_s_split_variance_is_the_variance_of_its_splits(
    drawn: list[tuple[str, list[float], list[float]]],
) -> None:
    for item, a, b in drawn:
        pair = SampledPair(item, tuple(a), tuple(b))
        splits = noise_module._splits(pair)
        assert noise_module.split_variance(pair) == pytest.approx(float(np.var(splits)), rel=1e-9, abs=1e-12)


def test_past_normal_past_pairs_the_normal_approximation_is_near_the_drawn_p(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 1,001 pairs, B one point up in every ninth: the splits' sum is close to normal there (at 12
    # pairs the normal p ran 15-25% below the exact one, which is why it waits for NORMAL_PAST).
    rng = np.random.default_rng(2)
    pairs: list[SampledPair] = []
    i = 0
    while sum(len(set(p.a + p.b)) > 1 for p in pairs) <= noise_module.NORMAL_PAST:  # those counted
        b = tuple(min(5.0, float(v) + (i % 9 == 0)) for v in rng.integers(1, 6, 3))
        pairs.append(SampledPair(str(i), (float(rng.integers(1, 6)),), b))
        i += 1
    normal = repeat_noise(pairs)
    monkeypatch.setattr(noise_module, "NORMAL_PAST", 10**9)
    drawn = repeat_noise(pairs, draws=20_000, seed=1)
    assert normal is not None and drawn is not None
    assert (normal.method, drawn.method) == ("normal approx.", "Monte Carlo")
    assert normal.change == pytest.approx(drawn.change, rel=1e-9)
    tail = drawn.p_value / 2
    assert 0.01 < drawn.p_value < 0.2
    assert abs(normal.p_value - drawn.p_value) < 4 * 2 * math.sqrt(tail * (1 - tail) / 20_000) + 0.002


def test_a_verdict_moved_alone_is_not_called_unknown_noise() -> None:
    # Another threshold: the same samples and scores, other verdicts. Nothing moved to set against
    # the noise, which both runs measured: "unknown (asked once)" would be false.
    samples = (4.0, 4.0, 5.0)
    made = {
        side: [
            Judgement(
                "paper", str(i), 0, "accuracy", 4.333333, cut < 4.333333, samples=samples, threshold=cut
            )
            for i in range(3)
        ]
        for side, cut in (("A", 4.0), ("B", 4.5))
    }
    a, b = (Run(side, {j.pair_key: j for j in made[side]}, {}) for side in "AB")
    rows, changes = summarise(a, b, resamples=200)
    (part,) = rows[0].rounds
    assert (part.changed, part.moved, part.noise) == (3, 0, None)
    shown = render(["A", "B"], rows, changes)
    assert "repeat noise: no score moved" in shown and "unknown" not in shown
    assert as_json(["A", "B"], rows, changes)["metrics"][0]["rounds"][0]["repeat_noise"] is None


def test_past_the_exact_limit_the_text_names_the_draws_and_their_seed() -> None:
    # Nine pairs of 4 splits each: 4^9 = 262,144 splits, past EXACT_SPLITS. The seed is --seed's.
    a = _run("A", {str(i): (2.0,) for i in range(9)})
    b = _run("B", {str(i): (4.0, 3.0, 5.0) for i in range(9)})
    rows, changes = summarise(a, b, resamples=200, seed=7)
    (part,) = rows[0].rounds
    assert part.noise is not None and (part.noise.method, part.noise.seed) == ("Monte Carlo", 7)
    shown = render(["A", "B"], rows, changes)
    assert "p = 0.0002, Holm 0.0004 (10000 draws, seed 7)" in shown
    assert all(len(line) <= 100 for line in shown.splitlines())
