"""The diverse top-k selection: checked against brute force over every k-subset of random pools."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.experiments.selection.select import Candidate, Selection, select, weighted_score

WEIGHTS = {"fit": 0.6, "mood": 0.4}
DIMENSIONS = ("genre", "era", "energy")


@st.composite
def problems(draw: st.DrawFn) -> tuple[list[Candidate], int, float, dict[str, int]]:
    k = draw(st.integers(1, 4))
    n = draw(st.integers(1, 10))  # n <= k too: a pool smaller than k
    alphabets = {d: draw(st.integers(1, 4)) for d in DIMENSIONS}
    quarter = st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0])  # judge ratings 1-5: ties are common
    # The first `clustered` candidates score best and share one signature, so the top k by score
    # alone misses the targets and only a real search meets them.
    clustered = draw(st.integers(0, n))
    candidates = []
    for i in range(n):
        if i < clustered:
            scores, categories = {"fit": 1.0, "mood": draw(quarter)}, {d: f"{d}0" for d in DIMENSIONS}
        else:
            scores = {"fit": draw(quarter), "mood": draw(quarter)}
            categories = {d: f"{d}{draw(st.integers(0, alphabets[d] - 1))}" for d in DIMENSIONS}
        candidates.append(Candidate(f"c{i}", scores, categories))
    lam = draw(st.sampled_from([0.0, 0.3, 0.7, 1.0]))
    chosen = draw(st.lists(st.sampled_from(DIMENSIONS), unique=True, min_size=1, max_size=3))
    targets = {d: draw(st.integers(1, k + 1)) for d in chosen}  # k + 1: never met
    return candidates, k, lam, targets


def distinct(picks: Sequence[Candidate], dimension: str) -> int:
    return len({c.categories[dimension] for c in picks})


def meets(picks: Sequence[Candidate], targets: Mapping[str, int]) -> bool:
    return all(distinct(picks, d) >= t for d, t in targets.items())


def objective(picks: Sequence[Candidate], k: int, lam: float, targets: Mapping[str, int]) -> float:
    relevance = math.fsum(weighted_score(c.scores, WEIGHTS) for c in picks) / len(picks)
    if k < 2 or not targets:
        return lam * relevance
    shares = [(distinct(picks, d) - 1) / (k - 1) for d in targets]
    return lam * relevance + (1 - lam) * math.fsum(shares) / len(shares)


def brute_force(
    candidates: list[Candidate], k: int, lam: float, targets: dict[str, int]
) -> tuple[int, float]:
    """The best (coverage, objective) over every k-subset: what select must reach."""
    size = min(k, len(candidates))
    return max(
        (
            sum(min(distinct(combo, d), t) for d, t in targets.items()),
            objective(combo, size, lam, targets),
        )
        for combo in itertools.combinations(candidates, size)
    )


def picked(selection: Selection, candidates: list[Candidate]) -> list[Candidate]:
    by_id = {c.id: c for c in candidates}
    return [by_id[i] for i in selection.picks]


@settings(max_examples=300, deadline=None)
@given(problems())
def test_targets_are_met_whenever_some_k_subset_meets_them(problem):
    candidates, k, lam, targets = problem
    selection = select(candidates, WEIGHTS, k, lam, targets)
    picks = picked(selection, candidates)
    assert len(set(selection.picks)) == len(selection.picks) == min(k, len(candidates))
    size = min(k, len(candidates))
    feasible = any(meets(combo, targets) for combo in itertools.combinations(candidates, size))
    if feasible:
        assert meets(picks, targets)
        assert selection.unmet == ()
    else:
        assert selection.unmet, "an infeasible pool must name the unmet target"
        for unmet in selection.unmet:
            assert unmet.dimension in targets and unmet.target == targets[unmet.dimension]
            assert unmet.achieved == distinct(picks, unmet.dimension) < unmet.target
            assert unmet.dimension in unmet.reason
        assert {u.dimension for u in selection.unmet} == {
            d for d, t in targets.items() if distinct(picks, d) < t
        }


@settings(max_examples=300, deadline=None)
@given(problems())
def test_exact_search_reaches_the_brute_force_optimum(problem):
    candidates, k, lam, targets = problem
    selection = select(candidates, WEIGHTS, k, lam, targets)
    assert selection.method == "exact"
    picks = picked(selection, candidates)
    coverage = sum(min(distinct(picks, d), t) for d, t in targets.items())
    best_coverage, best_objective = brute_force(candidates, k, lam, targets)
    assert coverage == best_coverage
    assert selection.objective == pytest.approx(best_objective, abs=1e-12)
    assert selection.objective == pytest.approx(objective(picks, len(picks), lam, targets), abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(problems())
def test_top_k_by_score_is_the_best_mean_and_the_price_is_never_negative(problem):
    candidates, k, lam, targets = problem
    selection = select(candidates, WEIGHTS, k, lam, targets)
    size = min(k, len(candidates))
    best_mean = max(
        math.fsum(weighted_score(c.scores, WEIGHTS) for c in combo) / size
        for combo in itertools.combinations(candidates, size)
    )
    assert selection.top_k_relevance == pytest.approx(best_mean, abs=1e-12)
    assert selection.price_of_diversity >= -1e-12


@settings(max_examples=100, deadline=None)
@given(problems(), st.randoms(use_true_random=False))
def test_the_input_order_does_not_change_the_selection(problem, rng):
    candidates, k, lam, targets = problem
    shuffled = list(candidates)
    rng.shuffle(shuffled)
    assert select(shuffled, WEIGHTS, k, lam, targets) == select(candidates, WEIGHTS, k, lam, targets)


@settings(max_examples=200, deadline=None)
@given(problems(), st.randoms(use_true_random=False), st.sampled_from([0.0, 0.1, 0.3, 1.0]))
def test_pairwise_tie_breaks_never_cost_a_target_or_a_distinct_pick(problem, rng, margin):
    candidates, k, lam, targets = problem
    order = [c.id for c in candidates]
    rng.shuffle(order)
    plain = select(candidates, WEIGHTS, k, lam, targets)
    ordered = select(candidates, WEIGHTS, k, lam, targets, order=order)  # stage 1 alone: equal W only
    broken = select(candidates, WEIGHTS, k, lam, targets, order=order, tie_margin=margin)
    assert ordered.objective == pytest.approx(plain.objective, abs=1e-12) and ordered.tie_breaks == ()
    assert len(set(broken.picks)) == len(broken.picks) == len(plain.picks)
    assert broken.diversity == ordered.diversity
    assert {u.dimension for u in broken.unmet} == {u.dimension for u in plain.unmet}
    assert ordered.relevance - broken.relevance <= margin * len(candidates) + 1e-12
    swapped = {old for old, _ in broken.tie_breaks}
    assert set(broken.picks) - set(ordered.picks) <= {new for _, new in broken.tie_breaks}
    assert swapped <= set(ordered.picks)


@settings(max_examples=300, deadline=None)
@given(problems())
def test_greedy_fallback_meets_a_single_target_whenever_the_pool_allows(problem):
    candidates, k, lam, targets = problem
    single = dict(list(targets.items())[:1])
    selection = select(candidates, WEIGHTS, k, lam, single, max_exact_options=0)
    assert selection.method == "greedy"
    picks = picked(selection, candidates)
    assert len(set(selection.picks)) == len(picks) == min(k, len(candidates))
    size = min(k, len(candidates))
    if any(meets(combo, single) for combo in itertools.combinations(candidates, size)):
        assert meets(picks, single)


def pool_of(rows: list[tuple[str, float, str, str]]) -> list[Candidate]:
    return [Candidate(cid, {"fit": s, "mood": s}, {"genre": g, "era": e}) for cid, s, g, e in rows]


def test_an_unmeetable_era_target_is_reported_with_the_pool_s_only_value():
    pool = pool_of([("a", 1.0, "rock", "1990s"), ("b", 0.75, "pop", "1990s"), ("c", 0.5, "rap", "1990s")])
    selection = select(pool, WEIGHTS, 3, 0.7, {"genre": 2, "era": 2})
    assert [(u.dimension, u.achieved) for u in selection.unmet] == [("era", 1)]
    assert selection.unmet[0].reason == "the pool has only 1 distinct era value(s) (1990s)"
    assert sorted(selection.picks) == ["a", "b", "c"]


def test_targets_unmeetable_together_are_reported_as_such():
    # Each target alone is met by some pair, but every pair repeats a genre, an era or an energy band.
    rows = [("a", "rock", "1980s", "low"), ("b", "pop", "1980s", "high"), ("c", "rock", "2010s", "high")]
    pool = [
        Candidate(i, {"fit": 0.5, "mood": 0.5}, {"genre": g, "era": e, "energy": b}) for i, g, e, b in rows
    ]
    selection = select(pool, WEIGHTS, 2, 1.0, {"genre": 2, "era": 2, "energy": 2})
    assert len(selection.unmet) == 1
    assert selection.unmet[0].reason.startswith("the pool has 2 distinct ")
    assert (
        "but no 2 picks reach" in selection.unmet[0].reason and "together with" in selection.unmet[0].reason
    )


def test_more_targets_than_picks_say_k_is_too_small():
    pool = pool_of([(f"t{i}", 0.5, f"g{i}", "2000s") for i in range(5)])
    selection = select(pool, WEIGHTS, 3, 0.7, {"genre": 4})
    assert selection.unmet[0].reason == "3 pick(s) cannot hold 4 distinct genre values"


def test_diversity_costs_score_when_the_best_tracks_share_a_genre():
    pool = pool_of([("a", 1.0, "rock", "1970s"), ("b", 1.0, "rock", "1980s"), ("c", 0.25, "pop", "1990s")])
    selection = select(pool, WEIGHTS, 2, 1.0, {"genre": 2})
    assert selection.top_k_by_score == ("a", "b")
    assert selection.picks == ("a", "c")
    assert selection.price_of_diversity == pytest.approx(0.375)


def test_the_tie_break_order_settles_equal_scores():
    pool = pool_of([("a", 0.5, "rock", "1970s"), ("b", 0.5, "rock", "1970s"), ("c", 0.5, "rock", "1970s")])
    assert select(pool, WEIGHTS, 1, 0.7, {}).picks == ("a",)
    assert select(pool, WEIGHTS, 1, 0.7, {}, order=["c", "a", "b"]).picks == ("c",)


def test_a_consistent_pairwise_winner_within_the_margin_replaces_a_same_signature_pick():
    pool = pool_of([("a", 0.76, "rock", "1970s"), ("b", 0.75, "rock", "1970s"), ("c", 0.5, "pop", "1980s")])
    targets = {"genre": 2}
    assert select(pool, WEIGHTS, 2, 1.0, targets, order=["b", "a", "c"]).picks == ("a", "c")  # margin 0
    selection = select(pool, WEIGHTS, 2, 1.0, targets, order=["b", "a", "c"], tie_margin=0.02)
    assert selection.picks == ("b", "c") and selection.tie_breaks == (("a", "b"),)
    assert selection.relevance == pytest.approx((0.75 + 0.5) / 2)
    assert select(pool, WEIGHTS, 2, 1.0, targets, order=["a", "b", "c"], tie_margin=0.02).tie_breaks == ()


def test_a_pairwise_winner_of_another_signature_does_not_displace_a_pick():
    pool = pool_of([("a", 0.76, "rock", "1970s"), ("b", 0.75, "rap", "1970s"), ("c", 0.5, "pop", "1980s")])
    selection = select(pool, WEIGHTS, 2, 1.0, {"genre": 2}, order=["b", "a", "c"], tie_margin=0.02)
    assert selection.picks == ("a", "b") and selection.tie_breaks == ()


def test_a_candidate_without_a_weighted_score_is_left_out_and_listed():
    pool = [
        Candidate("a", {"fit": 1.0}, {"genre": "rock"}),
        Candidate("b", {"fit": 0.5, "mood": 0.5}, {"genre": "pop"}),
    ]
    selection = select(pool, WEIGHTS, 2, 0.7, {"genre": 2})
    assert selection.picks == ("b",)
    assert selection.excluded == {"a": ("mood",)}
    assert "only 1 distinct genre" in selection.unmet[0].reason


def test_forty_candidates_three_picks_is_an_exact_search_of_at_most_c_42_3():
    pool = [
        Candidate(
            f"t{i:02d}", {"fit": (i % 5) / 4, "mood": (i % 3) / 2}, {"genre": f"g{i % 6}", "era": f"e{i % 7}"}
        )
        for i in range(40)
    ]
    selection = select(pool, WEIGHTS, 3, 0.7, {"genre": 2, "era": 2})
    assert selection.method == "exact"
    assert selection.options_checked <= math.comb(42, 3)
    assert selection.targets_met


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"k": 0}, "k must be at least 1"),
        ({"lam": 1.5}, "lambda must lie in 0-1"),
        ({"weights": {"fit": 0.5, "mood": 0.4}}, "sum to 1"),
        ({"targets": {"mood_band": 2}}, "no category for target dimension"),
    ],
)
def test_bad_arguments_are_refused(kwargs, message):
    arguments = {"k": 2, "lam": 0.5, "weights": WEIGHTS, "targets": {"genre": 2}, **kwargs}
    pool = pool_of([("a", 1.0, "rock", "1970s"), ("b", 0.5, "pop", "1980s")])
    with pytest.raises(ValueError, match=message):
        select(pool, arguments["weights"], arguments["k"], arguments["lam"], arguments["targets"])


def test_duplicate_ids_are_refused():
    pool = pool_of([("a", 1.0, "rock", "1970s"), ("a", 0.5, "pop", "1980s")])
    with pytest.raises(ValueError, match="unique"):
        select(pool, WEIGHTS, 2, 0.5, {})
