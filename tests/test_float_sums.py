"""Sums of floats that reach an output are math.fsum's, not the built-in sum()'s: Python 3.12 made
sum() of floats compensated, so 3.11 and 3.12/3.13 give another last bit for the same numbers, and
a replay under another Python rewrote a number (pipeline.numbers). Each example below is one where
3.11's sum() and fsum differ: before the fix these tests failed on 3.11 and passed on 3.12."""

from __future__ import annotations

import math

from pipeline.experiments.regen.aggregation import _percentiles
from pipeline.judges.structured.dimensions import Dimension, Dimensions
from pipeline.stats.paired import paired_bootstrap

# 3.11's sum() 3.8553499999999996 (3.8553 at 4 places), fsum and 3.12's sum() 3.85535 (3.8554).
SECONDS = [1.7627, 0.5695, 1.52315]


def test_regeneration_latency_totals_are_correctly_rounded_sums() -> None:
    assert _percentiles(SECONDS)["total"] == round(math.fsum(SECONDS), 4) == 3.8554


def test_a_weighted_mean_of_dimensions_is_the_same_on_every_python() -> None:
    weights = (0.25, 0.2, 0.3, 0.15, 0.1)  # the RAG design's, and a fifth
    dimensions = Dimensions(
        tuple(Dimension(name=f"d{i}", description="x", weight=w) for i, w in enumerate(weights))
    )
    values = dict(zip(dimensions.names, (0.75, 0.75, 0.5, 0.75, 0.5), strict=True))
    # 3.11's sum(): 0.6500000000000001
    assert dimensions.weighted_mean(values) == 0.65
    assert dimensions.simple_mean(values) == math.fsum(values.values()) / len(values)


def test_a_paired_bootstrap_estimate_is_the_same_on_every_python() -> None:
    interval = paired_bootstrap([[0.1] * 10], resamples=10)
    assert interval is not None
    assert interval.estimate == 0.1  # 3.11's sum(): 0.9999999999999999 / 10
