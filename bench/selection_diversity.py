"""The exact diverse selection against the seed design's greedy diversity pass, and its search time.

Seed 001 (BeatDebate's JudgeAgent) sorts candidates by weighted score, takes each one that brings
a value not yet seen on some unmet target, then fills the rest by score. This compares how often it
and pipeline.experiments.selection.select meet the targets when some k-subset could, on the
advocates' real pools: each of the 20 requests' pools (pool_size 30) from the fictional catalog and,
when ../shared is present, from the 2,400-track Spotify catalog. The judge's criteria scores do not
exist yet here, so each pool gets random scores on the judge's scale (0, 0.25, ..., 1), 50 draws
per request; the categories, and so the targets' difficulty, are the real pools'. Then the time of
the exact search on 40 candidates for k = 3, 4, 5.

    .venv/bin/python bench/selection_diversity.py
"""

from __future__ import annotations

import itertools
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.experiments.selection.params import SelectionSettings
from pipeline.experiments.selection.pools import request_pools
from pipeline.experiments.selection.select import Candidate, select, weighted_score

ROOT = Path(__file__).resolve().parents[1]
SPOTIFY = ROOT.parent / "shared/corpora/music-spotify/spotify_tracks_2400.csv"
WEIGHTS = {"fit": 0.6, "mood": 0.4}
DRAWS = 50
K = 3


def seed_greedy(candidates: list[Candidate], targets: dict[str, int], k: int) -> list[Candidate]:
    """_ensure_diversity of seed 001, on candidates sorted by weighted score (its pass 1 and pass 2)."""
    ranked = sorted(candidates, key=lambda c: -weighted_score(c.scores, WEIGHTS))
    chosen: list[Candidate] = []
    seen: dict[str, set[str]] = {d: set() for d in targets}
    for c in ranked:
        if len(chosen) >= k:
            break
        if any(len(seen[d]) < t and c.categories[d] not in seen[d] for d, t in targets.items()):
            chosen.append(c)
            for d in targets:
                seen[d].add(c.categories[d])
    for c in ranked:
        if len(chosen) >= k:
            break
        if c not in chosen:
            chosen.append(c)
    return chosen[:k]


def meets(picks: list[Candidate], targets: dict[str, int]) -> bool:
    return all(len({c.categories[d] for c in picks}) >= t for d, t in targets.items())


def compare(catalog: str) -> None:
    pools = request_pools(SelectionSettings(catalog=catalog, pool_size=30), ROOT)
    rng = random.Random(11)
    feasible = ours = greedy = 0
    price = []
    for rp in pools:
        targets = rp.framework.diversity_targets
        for _ in range(DRAWS):
            pool = [
                Candidate(
                    e.track.track_id,
                    {
                        "fit": rng.choice((0, 0.25, 0.5, 0.75, 1.0)),
                        "mood": rng.choice((0, 0.25, 0.5, 0.75, 1.0)),
                    },
                    {d: e.track.category(d) for d in targets},
                )
                for e in rp.pool
            ]
            if not any(meets(list(combo), targets) for combo in itertools.combinations(pool, K)):
                continue
            feasible += 1
            selection = select(pool, WEIGHTS, K, 1.0, targets)
            by_id = {c.id: c for c in pool}
            ours += meets([by_id[i] for i in selection.picks], targets)
            greedy += meets(seed_greedy(pool, targets, K), targets)
            price.append(selection.price_of_diversity)
    print(f"{catalog}: {len(pools)} requests x {DRAWS} score draws; {feasible} feasible")
    print(f"  targets met: exact selection {ours}/{feasible}, seed greedy {greedy}/{feasible}")
    print(f"  price of diversity at lambda=1: mean {sum(price) / len(price):.4f}, max {max(price):.4f}")


def timing() -> None:
    rng = random.Random(5)
    pool = [
        Candidate(
            f"t{i}",
            {"fit": rng.choice((0, 0.25, 0.5, 0.75, 1.0)), "mood": rng.choice((0, 0.25, 0.5, 0.75, 1.0))},
            {"genre": f"g{rng.randrange(6)}", "era": f"e{rng.randrange(6)}"},
        )
        for i in range(40)
    ]
    for k in (3, 4, 5):
        start = time.perf_counter()
        selection = select(pool, WEIGHTS, k, 0.7, {"genre": 2, "era": 2}, max_exact_options=10**7)
        elapsed = time.perf_counter() - start
        print(f"n=40 k={k}: exact search of {selection.options_checked} options in {elapsed * 1000:.0f} ms")


def main() -> None:
    compare("data/selection/catalog_fictional.csv")
    if SPOTIFY.is_file():
        compare(str(SPOTIFY))
    timing()


if __name__ == "__main__":
    main()
