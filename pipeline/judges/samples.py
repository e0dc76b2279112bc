"""judge.samples: each judgement asked N times, to see how stable the judge is.

Sample i asks the same question with its own seed, derived from llm.options.seed and i (sample 0
keeps the seed itself, so its call is the call a run with one sample makes, key and all); the seed
is in the request, hence in the key: every sample is recorded and replays, and a live rerun draws
the same samples. At temperature 0 a backend's sampling is greedy and the seed changes nothing, so
the samples can differ only where the backend uses the seed anyway (the run says so).

The judgement used downstream combines the samples' scores (judge.combine): their mean, or their
majority (the most frequent score; a tie goes to the lowest of the tied scores, the cautious
verdict for a loop that refines what scores low). Unscored samples are left out; none scored, none.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import SerializerFunctionWrapHandler, model_serializer

from pipeline.data.jsonl import Result
from pipeline.llm.types import Options

Combine = Literal["mean", "majority"]
SEED_RANGE = 2**32


class SampledResult(Result):
    """A result with a `samples` field of its own type (each sample's score, sample 0 first), left
    out of the file while None, so that a run with one sample writes what it wrote before."""

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and data.get("samples", 0) is None:
            del data["samples"]
        return data


def sample_seed(seed: int, sample: int) -> int:
    """Sample `sample`'s seed: the seed itself for sample 0, else a digest of (seed, sample)."""
    if sample == 0:
        return seed
    digest = hashlib.sha256(f"judgeloop-sample:{seed}:{sample}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % SEED_RANGE


def sample_options(options: Options, sample: int) -> Options:
    return options if sample == 0 else options.model_copy(update={"seed": sample_seed(options.seed, sample)})


def combine(scores: Sequence[int | float | None], how: Combine) -> int | float | None:
    scored = [s for s in scores if s is not None]
    if not scored:
        return None
    if how == "mean":
        return round(sum(scored) / len(scored), 6)
    counts = Counter(scored)
    most = max(counts.values())
    return min(score for score, count in counts.items() if count == most)


def only_seeds_differ(samples: int, options: Options) -> str | None:
    """What the run says when its samples can differ only through their seeds."""
    if samples > 1 and options.temperature == 0:
        return (
            f"judge.samples {samples} at temperature 0: the samples can differ only through their "
            "seeds (greedy decoding ignores them on most backends); raise llm.options.temperature "
            "to measure the judge's stability"
        )
    return None
