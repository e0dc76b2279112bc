"""The group bootstrap every agreement statistic here shares: groups (or rows) drawn with replacement
from a seeded numpy Generator, so a rerun gives identical numbers, a statistic computed once per
distinct draw, and a percentile interval over the finite resamples."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Estimate:
    """A statistic and its bootstrap percentile interval. `value` is NaN where it is undefined (a
    constant side); `undefined_resamples` counts the resamples where it was, left out of the interval."""

    value: float
    low: float
    high: float
    undefined_resamples: int


def percentile_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, int]:
    """The percentile interval of the finite values, and how many were not finite."""
    array = np.asarray(values, dtype=np.float64)
    finite = array[np.isfinite(array)]
    undefined = int(array.size - finite.size)
    if finite.size == 0:
        return math.nan, math.nan, undefined
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high), undefined


def group_resamples(n_groups: int, resamples: int, seed: int) -> IntArray:
    """How many times each group is drawn, one row per resample (groups drawn with replacement)."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_groups, size=(resamples, n_groups))
    # every row's counts in one bincount: resample r's group g is bin r * n_groups + g
    bins = (draws + np.arange(resamples, dtype=np.int64)[:, None] * n_groups).ravel()
    counts = np.bincount(bins, minlength=resamples * n_groups).astype(np.int64, copy=False)
    return counts.reshape(resamples, n_groups)


def distinct_resamples(resampled: IntArray) -> tuple[IntArray, IntArray]:
    """The distinct rows of `resampled`, and for each of its rows the index of its distinct row.

    A statistic of a resample depends only on how many times each unit was drawn, so it is
    computed once per distinct row and given to every resample that drew the same counts: the
    same function of the same input, so the same bits. With few units most resamples repeat one
    another (3 groups have 10 possible rows, drawn 1,000 times); with many, nearly none do."""
    if resampled.size == 0:
        return resampled, np.zeros(resampled.shape[0], dtype=np.int64)
    rows, inverse = np.unique(resampled, axis=0, return_inverse=True)
    return rows, inverse.reshape(-1).astype(np.int64, copy=False)
