"""Pairwise tie-breaks: near ties, folding verdicts asked in both orders, position consistency."""

from __future__ import annotations

import pytest

from pipeline.experiments.selection.ties import (
    NearTie,
    PairwiseVerdict,
    fold_verdicts,
    near_ties,
    pairwise_wins,
    position_consistency,
    tie_break_order,
)


def both_orders(a: str, b: str, winner_ab: str | None, winner_ba: str | None) -> list[PairwiseVerdict]:
    return [PairwiseVerdict(a, b, winner_ab, f"k-{a}{b}"), PairwiseVerdict(b, a, winner_ba, f"k-{b}{a}")]


def test_near_ties_are_adjacent_pairs_within_the_margin():
    weighted = {"a": 0.9, "b": 0.86, "c": 0.7, "d": 0.7, "e": 0.2}
    ranking = ["a", "b", "c", "d", "e"]
    assert near_ties(ranking, weighted, 0.0) == [NearTie("c", "d", 0.0)]
    ties = near_ties(ranking, weighted, 0.05)
    assert [(t.higher, t.lower) for t in ties] == [("a", "b"), ("c", "d")]
    assert ties[0].gap == pytest.approx(0.04)


def test_a_ranking_not_by_score_is_refused():
    with pytest.raises(ValueError, match="not by weighted score"):
        near_ties(["a", "b"], {"a": 0.1, "b": 0.2}, 0.5)


def test_same_winner_in_both_orders_is_consistent_and_a_flip_is_a_tie():
    verdicts = (
        both_orders("a", "b", "b", "b") + both_orders("c", "d", "c", "d") + both_orders("e", "f", "e", None)
    )
    outcomes = {o.pair: o for o in fold_verdicts(verdicts)}
    assert outcomes["a", "b"].status == "consistent" and outcomes["a", "b"].winner == "b"
    assert outcomes["a", "b"].call_keys == ("k-ab", "k-ba")
    assert outcomes["c", "d"].status == "flipped" and outcomes["c", "d"].winner is None
    assert outcomes["e", "f"].status == "incomplete" and outcomes["e", "f"].winner is None


def test_one_order_alone_is_incomplete():
    (outcome,) = fold_verdicts([PairwiseVerdict("a", "b", "a", "k1")])
    assert outcome.status == "incomplete" and outcome.call_keys == ("k1",)


def test_position_consistency_counts_only_pairs_with_both_verdicts():
    verdicts = (
        both_orders("a", "b", "a", "a")
        + both_orders("c", "d", "d", "d")
        + both_orders("e", "f", "e", "f")  # flipped: the judge preferred whichever came first
        + both_orders("g", "h", None, "g")
    )
    consistency = position_consistency(fold_verdicts(verdicts))
    assert (consistency.consistent, consistency.flipped, consistency.incomplete) == (2, 1, 1)
    assert consistency.rate == pytest.approx(2 / 3)
    assert position_consistency([]).rate is None


def test_tie_break_order_moves_only_consistent_winners_within_a_run():
    ranking = ["a", "b", "c", "d", "e"]
    ties = [NearTie("a", "b", 0.0), NearTie("b", "c", 0.0), NearTie("d", "e", 0.01)]
    # c beats b and b beats a (both consistent): the run a, b, c reverses; d-e flipped: unchanged.
    outcomes = fold_verdicts(
        both_orders("a", "b", "b", "b") + both_orders("b", "c", "c", "c") + both_orders("d", "e", "d", "e")
    )
    assert tie_break_order(ranking, ties, outcomes) == ["c", "b", "a", "d", "e"]
    assert [o.pair for o in pairwise_wins("c", outcomes)] == [("b", "c")]


def test_a_verdict_outside_a_run_moves_nothing():
    outcomes = fold_verdicts(both_orders("a", "b", "b", "b"))
    assert tie_break_order(["a", "b"], [], outcomes) == ["a", "b"]


@pytest.mark.parametrize(
    ("verdicts", "message"),
    [
        ([PairwiseVerdict("a", "a", "a", "k")], "with itself"),
        ([PairwiseVerdict("a", "b", "c", "k")], "neither"),
        ([PairwiseVerdict("a", "b", "a", "k"), PairwiseVerdict("a", "b", "b", "k2")], "two verdicts"),
    ],
)
def test_malformed_verdicts_are_refused(verdicts, message):
    with pytest.raises(ValueError, match=message):
        fold_verdicts(verdicts)
