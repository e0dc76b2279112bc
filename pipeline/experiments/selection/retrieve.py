"""The advocates: a simple, deterministic retrieval of a request's candidate pool from the catalog.

Two advocates, after the seed design's GenreMoodAgent and DiscoveryAgent, each rank the tracks that
pass the request's filters (`retrieve:` in the requests file):

    filters      any of `tags` among the track's genre/subgenre tags (no tags: every track);
                 release_year within `years`; track_popularity within `popularity`; each audio
                 feature within its `features` range; all bounds inclusive
    genre_mood   closest to the request's mood first: Euclidean distance between the track's audio
                 features and `prefer` (e.g. {energy: 0.3, valence: 0.6}); without `prefer`, most
                 popular first
    discovery    least popular first (track_popularity ascending), then as genre_mood

The pool takes the advocates' proposals in turn (genre_mood's best, discovery's best, genre_mood's
next, ...), skipping a track already in the pool and an artist already holding `max_per_artist`
places, until it holds `pool_size` tracks or both lists are spent. Every tie is broken by track_id,
so the same catalog and request always give the same pool in the same order. A pool smaller than
pool_size means the filters let fewer tracks through; the caller reports it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.data.catalog import Track
from pipeline.data.listening_requests import RetrievalSpec

ADVOCATES = ("genre_mood", "discovery")


@dataclass(frozen=True)
class PoolEntry:
    track: Track
    advocate: str  # the advocate whose proposal put the track in the pool
    ranks: dict[str, int]  # the track's 1-based rank in each advocate's list

    def record(self) -> dict[str, Any]:
        """As written to outputs (canonical JSON): the catalog row, with who proposed it."""
        return {"track": self.track.model_dump(), "advocate": self.advocate, "ranks": dict(self.ranks)}


def matches(track: Track, spec: RetrievalSpec) -> bool:
    if spec.tags and not set(spec.tags) & set(track.tags):
        return False
    if spec.years is not None and not spec.years[0] <= track.release_year <= spec.years[1]:
        return False
    if spec.popularity is not None and not spec.popularity[0] <= track.track_popularity <= spec.popularity[1]:
        return False
    return all(low <= getattr(track, name) <= high for name, (low, high) in spec.features.items())


def mood_distance(track: Track, spec: RetrievalSpec) -> float:
    return math.sqrt(
        math.fsum((getattr(track, name) - target) ** 2 for name, target in sorted(spec.prefer.items()))
    )


def advocate_rankings(tracks: Sequence[Track], spec: RetrievalSpec) -> dict[str, list[Track]]:
    """Each advocate's ranking of the tracks that pass the filters, best first."""
    passing = [t for t in tracks if matches(t, spec)]

    def mood_key(t: Track) -> tuple[float, str]:
        return (mood_distance(t, spec), t.track_id) if spec.prefer else (-t.track_popularity, t.track_id)

    keys: dict[str, Callable[[Track], tuple[float | int | str, ...]]] = {
        "genre_mood": mood_key,
        "discovery": lambda t: (t.track_popularity, *mood_key(t)),
    }
    return {name: sorted(passing, key=keys[name]) for name in ADVOCATES}


def retrieve(
    tracks: Sequence[Track], spec: RetrievalSpec, pool_size: int, max_per_artist: int = 2
) -> list[PoolEntry]:
    """The request's pool, in the order the advocates proposed it (module docstring)."""
    if pool_size < 1 or max_per_artist < 1:
        raise ValueError(
            f"pool_size and max_per_artist must be at least 1, not {pool_size}, {max_per_artist}"
        )
    rankings = advocate_rankings(tracks, spec)
    ranks = {
        name: {t.track_id: rank for rank, t in enumerate(ranking, start=1)}
        for name, ranking in rankings.items()
    }
    cursors = dict.fromkeys(ADVOCATES, 0)
    pool: list[PoolEntry] = []
    taken: set[str] = set()
    per_artist: Counter[str] = Counter()
    while len(pool) < pool_size and any(cursors[n] < len(rankings[n]) for n in ADVOCATES):
        for name in ADVOCATES:
            ranking = rankings[name]
            while cursors[name] < len(ranking):
                track = ranking[cursors[name]]
                cursors[name] += 1
                if track.track_id not in taken and per_artist[track.track_artist] < max_per_artist:
                    taken.add(track.track_id)
                    per_artist[track.track_artist] += 1
                    both = {n: ranks[n][track.track_id] for n in ADVOCATES}
                    pool.append(PoolEntry(track, name, both))
                    break
            if len(pool) == pool_size:
                break
    return pool
