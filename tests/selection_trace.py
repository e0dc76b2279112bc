"""Every number in the selection's explanations, traced back to a recorded call or a catalog row.

`check_traceable` re-derives each explanation from the recordings alone: a judged criterion's
rating is read again from the recorded reply its last call key names, the score is (rating-1)/4,
the contribution score x weight with the framework's weight, the total their sum (the W the
ranking holds); an attribute's value is the track's column; a pairwise win is read again from the
two recorded comparison replies. It raises AssertionError at the first number that does not trace.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pipeline.experiments.selection.judging import PairwiseReply, RatingReply
from pipeline.llm.records import RecordedCall


def _diversity(covered: Mapping[str, set[str]], k: int) -> float:
    if k < 2 or not covered:
        return 0.0
    return math.fsum(max(len(v) - 1, 0) / (k - 1) for v in covered.values()) / len(covered)


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def check_traceable(
    scored: Sequence[Mapping[str, Any]],
    picks: Sequence[Mapping[str, Any]],
    calls: Mapping[str, RecordedCall],
    catalog: Mapping[str, Mapping[str, Any]] | None = None,
) -> int:
    """Check every explanation of `picks` (pick records) against `scored` (score records) and the
    recorded `calls` by key, and the tracks against `catalog` rows by id when given. Returns how
    many numbers were traced."""
    traced = 0
    by_request = {r["request"]["id"]: r for r in scored}
    for pick in picks:
        request = by_request[pick["request"]]
        framework = request["framework"]
        pool = {c["track"]["track_id"]: c for c in request["pool"]}
        ranking = {row["candidate"]: row["weighted"] for row in pick["selection"]["ranking"]}
        k = len(pick["selection"]["picks"])
        covered: dict[str, set[str]] = {d: set() for d in sorted(framework["diversity_targets"])}
        for explanation in pick["explanations"]:
            cid = explanation["candidate"]
            track = pool[cid]["track"]
            where = f"{pick['request']}/{cid}"
            if catalog is not None:
                row = catalog[cid]
                _check(
                    all(_plain(row[f]) == _plain(v) for f, v in track.items() if f != "line"),
                    f"{where}: not the catalog row",
                )
            contributions = []
            for c in explanation["criteria"]:
                name = c["criterion"]
                at = f"{where} {name}"
                weight = framework["criteria"][name]["weight"]
                _check(c["weight"] == weight, f"{at}: weight {c['weight']} is not the framework's")
                if c["source"] == "judge":
                    call = calls[c["call_keys"][-1]]
                    _check(call.context.item == pick["request"], f"{at}: call of another request")
                    _check(call.context.labels.get("candidate") == cid, f"{at}: call of another track")
                    _check(
                        call.context.labels.get("criterion") == name,
                        f"{at}: call of another criterion",
                    )
                    rating = RatingReply.model_validate_json(call.record.reply.text).rating
                    _check(
                        c["rating"] == rating,
                        f"{at}: rating {c['rating']}, the reply says {rating}",
                    )
                    _check(
                        c["score"] == (rating - 1) / 4,
                        f"{at}: score {c['score']} is not (rating-1)/4",
                    )
                    _check(all(key in calls for key in c["call_keys"]), f"{at}: a call is not recorded")
                else:
                    value = float(track[c["attribute"]])
                    _check(c["attribute_value"] == value, f"{at}: attribute value is not the track's")
                    scale = 100.0 if c["attribute"] == "track_popularity" else 1.0
                    invert = framework["criteria"][name]["invert"]
                    expected = 1.0 - value / scale if invert else value / scale
                    _check(c["score"] == expected, f"{at}: score {c['score']} is not from {value}")
                _check(
                    c["contribution"] == c["score"] * weight,
                    f"{at}: contribution != score x weight",
                )
                contributions.append(c["contribution"])
                traced += 4
            total = math.fsum(contributions)
            _check(explanation["total"] == total == ranking[cid], f"{where}: total is not the sum / the W")
            before = _diversity(covered, k)
            for d in covered:
                _check(explanation["categories"][d] == _category(track, d), f"{where}: category {d}")
                covered[d].add(explanation["categories"][d])
            _check(
                explanation["diversity_gain"] == _diversity(covered, k) - before, f"{where}: diversity gain"
            )
            for won in explanation["pairwise_won"]:
                for key in won["call_keys"]:
                    call = calls[key]
                    first, second = call.context.labels["order"].split(">")
                    better = PairwiseReply.model_validate_json(call.record.reply.text).better
                    _check((first if better == "A" else second) == cid, f"{where}: {key} is no win")
                    _check({first, second} == {cid, won["opponent"]}, f"{where}: {key} compares others")
                _check(len(set(won["call_keys"])) == 2, f"{where}: a win needs both orders")
            traced += 3
    return traced


def _plain(value: Any) -> Any:
    """A tuple read from the catalog and a list read back from JSON are the same tags."""
    return list(value) if isinstance(value, tuple) else value


def _category(track: Mapping[str, Any], dimension: str) -> str:
    if dimension == "era":
        return f"{track['release_year'] // 10 * 10}s"
    if dimension == "artist":
        return str(track["track_artist"])
    if dimension == "energy":
        return "low" if track["energy"] < 0.4 else "medium" if track["energy"] < 0.7 else "high"
    return str(track[dimension])
