"""How well a judge's scores separate rows people labelled true from false (the RAG judge), on
numbers in memory (no I/O): AUROC is the Mann-Whitney U of the positives over all (positive,
negative) pairs, ties counting one half; the balanced accuracy is measured on rows its threshold was
not chosen on. Each with a bootstrap interval over rows, or over groups when given
(pipeline.stats.bootstrap)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pipeline.stats.bootstrap import (
    Estimate,
    FloatArray,
    IntArray,
    distinct_resamples,
    group_resamples,
    percentile_interval,
)
from pipeline.stats.counted import COUNTED_LIMIT, counted_auroc, counted_balanced_accuracy

Numbers = Sequence[float] | FloatArray
Flags = Sequence[bool] | npt.NDArray[np.bool_]


def auroc(scores: Numbers, labels: Flags) -> float:
    """The probability that a positive row outscores a negative one (ties count 1/2): Mann-Whitney
    U / (n_pos * n_neg). NaN when one class is absent."""
    score_array, label_array = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=bool)
    positive, negative = score_array[label_array], score_array[~label_array]
    if positive.size == 0 or negative.size == 0:
        return math.nan
    if np.isnan(positive).any() or np.isnan(negative).any():
        return math.nan  # as scipy's mannwhitneyu (nan_policy "propagate") gives it
    # U counted from the sorted negatives: for each positive, the negatives below it and half those
    # equal to it. The same number as scipy's rank sum (a half-integer, exact either way), about a
    # hundred times faster: the bootstrap takes it 1,000 times per estimate.
    below = np.sort(negative)
    left = np.searchsorted(below, positive, side="left")
    right = np.searchsorted(below, positive, side="right")
    u = int((left + right).sum()) / 2
    return u / float(positive.size * negative.size)


def balanced_accuracy(predicted: Flags, labels: Flags) -> float:
    """The mean of the true-positive and true-negative rates; NaN when one class is absent."""
    p, y = np.asarray(predicted, dtype=bool), np.asarray(labels, dtype=bool)
    if y.all() or not y.any():
        return math.nan
    return float((p[y].mean() + (~p[~y]).mean()) / 2)


def best_threshold(scores: Numbers, labels: Flags) -> float:
    """The threshold t maximising balanced accuracy of `score >= t` (the smallest such t), among
    the points halfway between adjacent distinct scores: a new score falling in the gap between
    the classes then goes to the nearer side, not to whichever side an observed score sits on."""
    score_array = np.asarray(scores, dtype=np.float64)
    values = np.unique(score_array)
    if values.size < 2:
        raise ValueError("choosing a threshold needs at least two distinct scores")
    candidates = (values[:-1] + values[1:]) / 2
    accuracies = [balanced_accuracy(score_array >= t, labels) for t in candidates]
    if all(math.isnan(a) for a in accuracies):
        raise ValueError("choosing a threshold needs both classes")
    return float(candidates[int(np.nanargmax(accuracies))])


def _units(n_rows: int, groups: Sequence[str] | None) -> tuple[IntArray, int]:
    if groups is None:
        return np.arange(n_rows, dtype=np.int64), n_rows
    if len(groups) != n_rows:
        raise ValueError("groups and scores differ in length")
    names = sorted(set(groups))
    index = {name: i for i, name in enumerate(names)}
    return np.array([index[g] for g in groups], dtype=np.int64), len(names)


def _resampled_rows(members: list[IntArray], resamples: IntArray) -> Iterator[IntArray]:
    """Each resample's rows: every unit's rows, in unit order, as many times over as it was drawn,
    a unit's rows together (what concatenating np.tile(members[u], count) gives, without a Python
    loop over units: the bootstrap draws 1,000 of them per estimate)."""
    flat = np.concatenate(members) if members else np.zeros(0, dtype=np.int64)
    sizes = np.array([m.size for m in members], dtype=np.int64)
    starts = np.cumsum(sizes) - sizes
    units = np.arange(len(members), dtype=np.int64)
    for counts in resamples:
        drawn = np.repeat(units, counts)  # each unit, once per time it was drawn, in unit order
        lengths = sizes[drawn]
        offsets = np.cumsum(lengths) - lengths  # where each drawn unit's rows begin in the resample
        within = np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(offsets, lengths)
        yield flat[np.repeat(starts[drawn], lengths) + within].astype(np.int64)


def _bootstrap(
    statistic: Callable[[IntArray], float],
    unit: IntArray,
    n_units: int,
    resamples: int,
    seed: int,
    counted: Callable[[IntArray], list[float]] | None = None,
) -> Estimate:
    """`statistic(rows)` on the data, and its percentile interval over resampled units. `counted`,
    where given, is the same statistic of every resample at once from each row's draw count (one
    row of weights per resample; pipeline.stats.counted)."""
    point = statistic(np.arange(unit.size, dtype=np.int64))
    resampled = group_resamples(n_units, resamples, seed)
    if counted is not None and unit.size <= COUNTED_LIMIT:
        draws = counted(resampled[:, unit]) if resamples else []
    else:
        members = [np.flatnonzero(unit == u) for u in range(n_units)]
        counts, which = distinct_resamples(resampled)
        distinct = [statistic(rows) for rows in _resampled_rows(members, counts)]
        draws = [distinct[i] for i in which]
    low, high, undefined = percentile_interval(draws)
    return Estimate(point, low, high, undefined)


def auroc_estimate(
    scores: Sequence[float],
    labels: Sequence[bool],
    *,
    groups: Sequence[str] | None = None,
    resamples: int = 1000,
    seed: int = 0,
) -> Estimate:
    """AUROC with a bootstrap interval over rows, or over groups when given."""
    score_array, label_array = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=bool)
    unit, n_units = _units(len(score_array), groups)
    finite = bool(np.isfinite(score_array).all())  # a NaN makes a resample NaN: gathered rows say so
    return _bootstrap(
        lambda r: auroc(score_array[r], label_array[r]),
        unit,
        n_units,
        resamples,
        seed,
        (lambda w: counted_auroc(score_array, label_array, w)) if finite else None,
    )


@dataclass(frozen=True)
class HeldOutAccuracy:
    threshold: float  # positive when score >= threshold; chosen on the fit half (best_threshold)
    fit_rows: int
    eval_rows: int
    balanced_accuracy: Estimate  # on the eval half only


def held_out_balanced_accuracy(
    scores: Sequence[float],
    labels: Sequence[bool],
    *,
    groups: Sequence[str] | None = None,
    resamples: int = 1000,
    seed: int = 0,
) -> HeldOutAccuracy:
    """Balanced accuracy at a threshold chosen on one half of the units (rows, or groups when given,
    so one document never lands in both halves), measured on the other half with a bootstrap interval."""
    score_array, label_array = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=bool)
    unit, n_units = _units(len(score_array), groups)
    order = np.random.default_rng(seed).permutation(n_units)
    fit_units = order[: (n_units + 1) // 2]
    fit = np.isin(unit, fit_units)
    threshold = best_threshold(score_array[fit].tolist(), label_array[fit].tolist())
    eval_scores, eval_labels = score_array[~fit], label_array[~fit]
    if eval_labels.all() or not eval_labels.any():
        raise ValueError("the evaluation half lacks one of the classes")
    eval_units, eval_unit = np.unique(unit[~fit], return_inverse=True)
    estimate = _bootstrap(
        lambda r: balanced_accuracy(eval_scores[r] >= threshold, eval_labels[r]),
        eval_unit.astype(np.int64),
        len(eval_units),
        resamples,
        seed,
        lambda w: counted_balanced_accuracy(eval_scores >= threshold, eval_labels, w),
    )
    return HeldOutAccuracy(threshold, int(fit.sum()), int((~fit).sum()), estimate)
