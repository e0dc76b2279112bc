"""The bootstrap's shortcuts give the very numbers of the long way, to the last bit: AUROC and
balanced accuracy counted from each row's draws (pipeline.stats.counted) against the statistic on
each resample's gathered rows, and a statistic computed once per distinct resample against once per
resample."""

from __future__ import annotations

import math
import struct

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.stats.bootstrap import distinct_resamples, group_resamples
from pipeline.stats.classification import (
    _resampled_rows,
    auroc,
    auroc_estimate,
    balanced_accuracy,
    held_out_balanced_accuracy,
)
from pipeline.stats.correlation import Pair, correlate
from pipeline.stats.counted import counted_auroc, counted_balanced_accuracy


def bits(values: list[float]) -> list[bytes]:
    """Each float's bytes (every NaN alike), so that equal means equal to the last bit."""
    return [b"nan" if math.isnan(v) else struct.pack("<d", v) for v in values]


def gathered(statistic, unit: np.ndarray, n_units: int, resamples: int, seed: int) -> list[float]:
    members = [np.flatnonzero(unit == u) for u in range(n_units)]
    return [statistic(rows) for rows in _resampled_rows(members, group_resamples(n_units, resamples, seed))]


scores_st = st.lists(
    st.one_of(st.sampled_from([0.0, 0.25, 0.5, 1.0]), st.floats(-10, 10, allow_nan=False)),
    min_size=1,
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(scores=scores_st, data=st.data(), seed=st.integers(0, 2**32 - 1), grouped=st.booleans())
def test_counted_statistics_are_the_gathered_ones_to_the_bit(
    scores: list[float], data: st.DataObject, seed: int, grouped: bool
) -> None:
    n = len(scores)
    labels = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    score_array = np.array(scores, dtype=np.float64)
    unit = np.array(
        data.draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)) if grouped else range(n),
        dtype=np.int64,
    )
    _, unit = np.unique(unit, return_inverse=True)
    unit = unit.reshape(-1).astype(np.int64)
    n_units = int(unit.max()) + 1
    weights = group_resamples(n_units, 40, seed)[:, unit]
    expected = gathered(lambda r: auroc(score_array[r], labels[r]), unit, n_units, 40, seed)
    assert bits(counted_auroc(score_array, labels, weights)) == bits(expected)
    predicted = score_array >= data.draw(st.floats(-10, 10))
    expected = gathered(lambda r: balanced_accuracy(predicted[r], labels[r]), unit, n_units, 40, seed)
    assert bits(counted_balanced_accuracy(predicted, labels, weights)) == bits(expected)


def test_estimates_are_unchanged_on_data_with_many_ties() -> None:
    """auroc_estimate and held_out_balanced_accuracy, which take the counted form, give the gathered
    form's interval; a NaN score takes the gathered form and gives NaN resamples as before."""
    rng = np.random.default_rng(3)
    scores = rng.integers(0, 5, size=60).astype(float).tolist()
    labels = (rng.random(60) < 0.4).tolist()
    estimate = auroc_estimate(scores, labels, resamples=300, seed=5)
    array, flags = np.array(scores), np.array(labels)
    unit = np.arange(60, dtype=np.int64)
    draws = np.array(gathered(lambda r: auroc(array[r], flags[r]), unit, 60, 300, 5))
    low, high = np.percentile(draws[np.isfinite(draws)], [2.5, 97.5])
    assert (estimate.low, estimate.high) == (float(low), float(high))
    held = held_out_balanced_accuracy(scores, labels, resamples=300, seed=5)
    assert held.balanced_accuracy.low <= held.balanced_accuracy.value <= held.balanced_accuracy.high
    with_nan = auroc_estimate([math.nan, *scores[1:]], labels, resamples=50, seed=1)
    assert math.isnan(with_nan.value) and with_nan.undefined_resamples > 0


@settings(max_examples=60, deadline=None)
@given(n_units=st.integers(1, 6), resamples=st.integers(0, 300), seed=st.integers(0, 2**32 - 1))
def test_distinct_resamples_give_back_every_resample(n_units: int, resamples: int, seed: int) -> None:
    resampled = group_resamples(n_units, resamples, seed)
    rows, which = distinct_resamples(resampled)
    assert len({r.tobytes() for r in rows}) == len(rows)
    assert np.array_equal(rows[which], resampled) if resamples else which.size == 0
    # the counts are those of the draws, one bincount per row, as before
    draws = np.random.default_rng(seed).integers(0, n_units, size=(resamples, n_units))
    assert all(
        np.array_equal(np.bincount(d, minlength=n_units), c) for d, c in zip(draws, resampled, strict=True)
    )


def test_correlate_once_per_distinct_resample_is_correlate_per_resample(monkeypatch) -> None:
    """Three groups: 1,000 resamples repeat 10 rows. The intervals are those computed resample by
    resample (distinct_resamples replaced by one that keeps every row)."""
    rng = np.random.default_rng(0)
    pairs = [
        Pair(f"{g}/{s}", f"g{g}", f"s{s}", float(rng.integers(1, 6)), float(rng.random() * 4 + 1))
        for g in range(3)
        for s in range(4)
    ]
    fast = correlate(pairs, resamples=1000, seed=0)
    import pipeline.stats.correlation as correlation_module

    monkeypatch.setattr(
        correlation_module, "distinct_resamples", lambda r: (r, np.arange(r.shape[0], dtype=np.int64))
    )
    slow = correlate(pairs, resamples=1000, seed=0)
    for level, result in slow.items():
        for statistic, estimate in result.estimates.items():
            got = fast[level].estimates[statistic]
            assert bits([got.value, got.low, got.high]) == bits([estimate.value, estimate.low, estimate.high])
            assert got.undefined_resamples == estimate.undefined_resamples
