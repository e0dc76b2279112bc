"""AUROC and balanced accuracy of every bootstrap resample at once, from how many times each row
was drawn, rather than from each resample's rows gathered one resample at a time.

Both statistics of a resample are functions of whole numbers: the Mann-Whitney U (twice it is a
whole number: each positive row counts the negatives below it twice and those equal to it once)
and, for the balanced accuracy, the true positives, true negatives and the two classes' sizes. A
row drawn k times counts k times in each, so the numbers are matrix products of the draws' counts
with the data's (integer arithmetic, exact). The last float operations are those of `auroc` and
`balanced_accuracy` on the gathered rows (pipeline.stats.classification), in the same order on the same
values, so each resample's value is the same to the last bit (tests/test_counted_stats.py)."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

# Up to this many rows the counted form is used (its pair table is positives x negatives, and each
# resample a row of weights over every data row); past it, each resample's rows are gathered.
COUNTED_LIMIT = 500

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def counted_auroc(scores: FloatArray, labels: BoolArray, weights: IntArray) -> list[float]:
    """`auroc(scores[rows], labels[rows])` for each resample, row i drawn `weights[r, i]` times in
    resample r. Scores must be finite (a NaN makes `auroc` NaN: the caller gathers rows then)."""
    positive, negative = scores[labels], scores[~labels]
    # twice each (positive, negative) pair's share of U: 2 below, 1 tied, 0 above
    twice = (negative[None, :] < positive[:, None]).astype(np.int64) * 2
    twice += (negative[None, :] == positive[:, None]).astype(np.int64)
    on_positive, on_negative = weights[:, labels], weights[:, ~labels]
    twice_u = ((on_positive @ twice) * on_negative).sum(axis=1)
    n_positive, n_negative = on_positive.sum(axis=1), on_negative.sum(axis=1)
    values = []
    for u2, n_pos, n_neg in zip(twice_u.tolist(), n_positive.tolist(), n_negative.tolist(), strict=True):
        if n_pos == 0 or n_neg == 0:
            values.append(math.nan)
        else:
            values.append(u2 / 2 / float(n_pos * n_neg))  # auroc's `int(...) / 2`, then `u / float(...)`
    return values


def counted_balanced_accuracy(predicted: BoolArray, labels: BoolArray, weights: IntArray) -> list[float]:
    """`balanced_accuracy(predicted[rows], labels[rows])` for each resample, row i drawn
    `weights[r, i]` times in resample r."""
    n_positive = weights[:, labels].sum(axis=1)
    n_negative = weights[:, ~labels].sum(axis=1)
    hits_positive = weights[:, labels & predicted].sum(axis=1).astype(np.float64)
    hits_negative = weights[:, ~labels & ~predicted].sum(axis=1).astype(np.float64)
    values = []
    for r in range(weights.shape[0]):
        if n_positive[r] == 0 or n_negative[r] == 0:
            values.append(math.nan)
            continue
        # numpy's mean of booleans: their float64 sum (a whole number, exact) over the count
        rate_positive = hits_positive[r] / n_positive[r]
        rate_negative = hits_negative[r] / n_negative[r]
        values.append(float((rate_positive + rate_negative) / 2))
    return values
