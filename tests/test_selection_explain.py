"""Explanations: every number is one of the inputs, or one product or sum of them."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from pipeline.data.catalog import load_catalog
from pipeline.data.listening_requests import Criterion, Framework
from pipeline.experiments.selection.criteria import CriterionScore, attribute_score, judged_score
from pipeline.experiments.selection.explain import explain
from pipeline.experiments.selection.params import SelectionSettings
from pipeline.experiments.selection.pools import request_pools
from pipeline.experiments.selection.select import Candidate, select
from pipeline.experiments.selection.ties import (
    PairwiseVerdict,
    fold_verdicts,
    near_ties,
    position_consistency,
    tie_break_order,
)
from pipeline.llm.keys import canonical_json

ROOT = Path(__file__).resolve().parents[1]
FRAMEWORK = Framework(
    criteria={
        "relevance": Criterion(description="fits the request", weight=0.5),
        "mood_match": Criterion(description="sounds right", weight=0.3),
        "novelty": Criterion(
            description="1 - popularity/100",
            weight=0.2,
            source="attribute",
            attribute="track_popularity",
            invert=True,
        ),
    },
    diversity_targets={"genre": 2, "era": 2},
)


def scored_pool() -> tuple[dict[str, dict[str, CriterionScore]], dict[str, dict[str, str]]]:
    tracks = load_catalog(ROOT / "data/selection/catalog_fictional.csv")[::12][:20]
    scores: dict[str, dict[str, CriterionScore]] = {}
    for index, track in enumerate(tracks):
        scores[track.track_id] = {
            "relevance": judged_score("relevance", 1 + index % 5, (f"jl2:rel{index}",)),
            "mood_match": judged_score(
                "mood_match", 1 + (index * 3) % 5, (f"jl2:first{index}", f"jl2:reask{index}")
            ),
            "novelty": attribute_score("novelty", FRAMEWORK.criteria["novelty"], track),
        }
    categories = {t.track_id: {d: t.category(d) for d in ("genre", "era")} for t in tracks}
    return scores, categories


def _check_criterion_row(row, source, weights) -> None:
    """One criterion row of an explanation: its numbers are the inputs, or built from them."""
    assert row["score"] == source.score
    assert row["weight"] == weights[row["criterion"]]
    assert row["contribution"] == source.score * row["weight"]
    if source.source == "judge":
        assert row["rating"] == source.rating and row["call_keys"] == list(source.call_keys)
        assert row["score"] == (row["rating"] - 1) / 4
    else:
        assert row["attribute"] == "track_popularity"
        assert row["score"] == 1 - row["attribute_value"] / 100


def _check_coverage(record, categories, covered) -> None:
    """An explanation names a category as newly covered exactly when no earlier pick had it."""
    for dimension, value in record["categories"].items():
        assert value == categories[dimension]
        assert (f"{dimension}={value}" in record["newly_covers"]) == (value not in covered[dimension])
        covered[dimension].add(value)


def test_every_number_in_an_explanation_is_an_input_or_built_from_inputs():
    scores, categories = scored_pool()
    candidates = [
        Candidate(cid, {n: s.score for n, s in by.items()}, categories[cid]) for cid, by in scores.items()
    ]
    selection = select(candidates, FRAMEWORK.weights, 3, 0.7, FRAMEWORK.diversity_targets)
    a, b = selection.picks[0], selection.ranking[-1]
    outcomes = fold_verdicts([PairwiseVerdict(a, b, a, "jl2:ab"), PairwiseVerdict(b, a, a, "jl2:ba")])
    explanations = explain(
        selection, FRAMEWORK.weights, scores, categories, FRAMEWORK.diversity_targets, outcomes
    )

    assert [e.candidate for e in explanations] == list(selection.picks)
    covered: dict[str, set[str]] = {"genre": set(), "era": set()}
    for explanation in explanations:
        record = explanation.record()
        given = scores[explanation.candidate]
        for row in record["criteria"]:
            _check_criterion_row(row, given[row["criterion"]], FRAMEWORK.weights)
        assert record["total"] == math.fsum(row["contribution"] for row in record["criteria"])
        assert record["total"] == selection.weighted[explanation.candidate]
        _check_coverage(record, categories[explanation.candidate], covered)
    (won,) = explanations[0].record()["pairwise_won"]
    assert won["opponent"] == b and sorted(won["call_keys"]) == ["jl2:ab", "jl2:ba"]
    assert all(not e.pairwise_won for e in explanations[1:])


def test_diversity_gains_add_up_to_the_selection_s_diversity():
    scores, categories = scored_pool()
    candidates = [
        Candidate(cid, {n: s.score for n, s in by.items()}, categories[cid]) for cid, by in scores.items()
    ]
    selection = select(candidates, FRAMEWORK.weights, 3, 0.3, FRAMEWORK.diversity_targets)
    explanations = explain(selection, FRAMEWORK.weights, scores, categories, FRAMEWORK.diversity_targets)
    assert math.fsum(e.diversity_gain for e in explanations) == pytest.approx(selection.diversity, abs=1e-12)


def test_a_judged_score_must_name_its_calls_and_lie_on_the_scale():
    with pytest.raises(ValueError, match="name the call"):
        judged_score("relevance", 3, ())
    with pytest.raises(ValueError, match="1-5"):
        judged_score("relevance", 6, ("k",))
    assert [judged_score("r", rating, ("k",)).score for rating in range(1, 6)] == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_the_whole_flow_on_a_shipped_request_writes_the_same_bytes_twice():
    def run() -> str:
        (request_pool,) = request_pools(SelectionSettings(limit=1), ROOT)
        framework = Framework(
            criteria={
                "novelty": FRAMEWORK.criteria["novelty"].model_copy(update={"weight": 0.5}),
                "calm": Criterion(
                    description="1 - energy", weight=0.5, source="attribute", attribute="energy", invert=True
                ),
            },
            diversity_targets=request_pool.framework.diversity_targets,
        )
        tracks = {e.track.track_id: e.track for e in request_pool.pool}
        scores = {
            cid: {name: attribute_score(name, c, track) for name, c in framework.criteria.items()}
            for cid, track in tracks.items()
        }
        targets = framework.diversity_targets
        categories = {cid: {d: t.category(d) for d in targets} for cid, t in tracks.items()}
        candidates = [
            Candidate(cid, {n: s.score for n, s in by.items()}, categories[cid]) for cid, by in scores.items()
        ]
        first = select(candidates, framework.weights, 3, 0.7, targets)
        ties = near_ties(first.ranking, first.weighted, 0.02)
        verdicts = [
            v
            for t in ties
            for v in (
                PairwiseVerdict(t.higher, t.lower, t.lower, f"k{t.higher}"),
                PairwiseVerdict(t.lower, t.higher, t.lower, f"k{t.lower}"),
            )
        ]
        outcomes = fold_verdicts(verdicts)
        order = tie_break_order(first.ranking, ties, outcomes)
        final = select(candidates, framework.weights, 3, 0.7, targets, order=order, tie_margin=0.02)
        assert final.targets_met and len(set(final.picks)) == 3
        records = [
            e.record() for e in explain(final, framework.weights, scores, categories, targets, outcomes)
        ]
        pool = [e.record() for e in request_pool.pool]
        consistency = position_consistency(outcomes)
        return canonical_json(
            {
                "pool": pool,
                "selection": final.record(),
                "explanations": records,
                "consistency": [consistency.consistent, consistency.flipped, consistency.rate],
            }
        )

    assert run() == run()
