"""metrics.json of the selection experiment, from the score and pick records and the recordings.

    diversity       requests whose picks meet every target, and each unmet target with its reason
    weighted_score  mean W of the picks against the mean W of the top k by score alone; their
                    difference is the price of diversity (means over requests, W in 0-1)
    pairwise        near ties compared, verdicts that held when the order was swapped (consistent),
                    that flipped, that are incomplete (an unusable reply); position consistency =
                    consistent / (consistent + flipped), null when no pair had both verdicts
    judgements      ratings scored (and of those, after a re-ask), ratings asked again (scored or
                    not, counted from the recorded calls), failed (by kind); candidates excluded
                    for a failure
    calls           the calls each stage recorded, and how many of them repeat an earlier call's
                    key (served by the cache within the run: the same question asked twice)
    recorded_calls  each stage's recorded calls, re-asks, cut replies, prompts too long
                    (pipeline.data.recorded_calls: what `judgeloop audit` shows, counted)

Only what the recorded run fixes is written, so a replay writes the same bytes: how many calls a
given run took from the local cache depends on that cache, and the stages print it instead.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from statistics import fmean
from typing import Any

from pipeline.experiments.selection.score import ScoredRequest

DIGITS = 4


def _mean(values: Sequence[float]) -> float | None:
    return round(fmean(values), DIGITS) if values else None


Record = Mapping[str, Any]


def _diversity(picks: Sequence[Record], selections: Sequence[Record]) -> dict[str, Any]:
    met = sum(1 for s in selections if s["targets_met"])
    unmet = [{"request": p["request"], **u} for p in picks for u in p["selection"]["unmet"]]
    return {"targets_met": met, "targets_unmet": len(picks) - met, "unmet": unmet}


def _weighted_score(selections: Sequence[Record]) -> dict[str, Any]:
    return {
        "picks_mean": _mean([s["relevance"] for s in selections]),
        "top_k_by_score_mean": _mean([s["top_k_relevance"] for s in selections]),
        "price_of_diversity": _mean([s["price_of_diversity"] for s in selections]),
        "requests_paying": sum(1 for s in selections if s["price_of_diversity"] > 0),
    }


def _pairwise(picks: Sequence[Record], selections: Sequence[Record]) -> dict[str, Any]:
    consistency = Counter[str]()
    for p in picks:
        consistency.update(p["position_consistency"])
    decided = consistency["consistent"] + consistency["flipped"]
    return {
        "near_ties": sum(len(p["outcomes"]) for p in picks),
        "comparisons": sum(len(p["comparisons"]) for p in picks),
        "consistent": consistency["consistent"],
        "flipped": consistency["flipped"],
        "incomplete": consistency["incomplete"],
        "position_consistency": round(consistency["consistent"] / decided, DIGITS) if decided else None,
        "tie_breaks": sum(len(s["tie_breaks"]) for s in selections),
    }


def _judgements(
    scored: Sequence[ScoredRequest], selections: Sequence[Record], recorded: Mapping[str, int]
) -> dict[str, Any]:
    judged = [s for r in scored for c in r.pool for s in c.scores.values() if s.source == "judge"]
    failures = [f for r in scored for c in r.pool for f in c.failed.values()]
    return {
        "scored": len(judged),
        # more calls than samples: some sample of the rating was asked again
        "scored_after_reask": sum(1 for s in judged if len(s.call_keys) > max(1, len(s.samples))),
        "reasked": recorded.get("reasked", 0),
        "failed": len(failures),
        "failed_by_kind": dict(sorted(Counter(f.kind for f in failures).items())),
        "excluded_candidates": sum(len(s["excluded"]) for s in selections),
    }


def compute_metrics(
    scored: Sequence[ScoredRequest],
    picks: Sequence[Record],
    recorded_keys: Mapping[str, Sequence[str]],
    recorded: Mapping[str, Mapping[str, int]] | None = None,
) -> dict[str, Any]:
    """`picks`: the pick records (PickResult.record); `recorded_keys`: stage -> its calls' keys;
    `recorded`: stage -> its call counts (pipeline.data.recorded_calls; None: none recorded)."""
    recorded = recorded or {}
    selections = [p["selection"] for p in picks]
    return {
        "requests": len(picks),
        "candidates": sum(len(r.pool) for r in scored),
        "diversity": _diversity(picks, selections),
        "weighted_score": _weighted_score(selections),
        "pairwise": _pairwise(picks, selections),
        "judgements": _judgements(scored, selections, recorded.get("select_score", {})),
        "calls": {
            stage: {"recorded": len(keys), "repeated_keys": len(keys) - len(set(keys))}
            for stage, keys in sorted(recorded_keys.items())
        },
        "recorded_calls": {stage: dict(counts) for stage, counts in sorted(recorded.items())},
    }
