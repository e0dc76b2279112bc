"""How far a judge's scores agree with people's: the statistics, on numbers in memory (no I/O).

Correlations follow the summarization-evaluation literature (SummEval; G-Eval; Deutsch et al. 2021),
where a *group* is a source document and a *system* is what wrote the judged text:

    summary level   the correlation over one group's items, averaged over groups; a group where
                    either side is constant (or with fewer than 2 items) has no correlation, and
                    is skipped and counted, never counted as 0
    system level    the correlation over the systems' mean scores (judge means vs human means)
    global          the correlation over all items at once

Each with Spearman's rho, Kendall's tau-b (ties corrected) and Pearson's r, from scipy.stats, and a
bootstrap percentile interval that resamples *groups* with replacement (the unit the data were
sampled in), from a seeded numpy Generator, so a rerun gives identical numbers.

Krippendorff's alpha is the `krippendorff` package's, at the ordinal level (its rank-based
distance over the values observed). AUROC is the Mann-Whitney U of the positives over all
(positive, negative) pairs, ties counting one half; the balanced accuracy is measured on rows its
threshold was not chosen on.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from pipeline.stats.counted import COUNTED_LIMIT, counted_auroc, counted_balanced_accuracy
from pipeline.stats.reliability import krippendorff_alpha

Statistic = Literal["spearman", "kendall", "pearson"]
STATISTICS: tuple[Statistic, ...] = ("spearman", "kendall", "pearson")
Level = Literal["summary", "system", "global"]
LEVELS: tuple[Level, ...] = ("summary", "system", "global")

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Numbers = Sequence[float] | FloatArray
Flags = Sequence[bool] | npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Pair:
    """One judged item: its judge score and its human rating (the mean of the people's ratings)."""

    item: str
    group: str
    system: str
    judge: float
    human: float


@dataclass(frozen=True)
class Estimate:
    """A statistic and its bootstrap percentile interval. `value` is NaN where it is undefined (a
    constant side); `undefined_resamples` counts the resamples where it was, left out of the interval."""

    value: float
    low: float
    high: float
    undefined_resamples: int


@dataclass(frozen=True)
class LevelResult:
    level: Level
    units: int  # what was correlated: groups (summary), systems (system), items (global)
    skipped: Mapping[str, int]  # summary level: groups left out, by reason
    estimates: Mapping[Statistic, Estimate]


def correlation(
    statistic: Statistic, x: Sequence[float] | FloatArray, y: Sequence[float] | FloatArray
) -> float:
    """scipy's coefficient; NaN when either side is constant or has fewer than 2 values."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.size < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return math.nan
    if statistic == "spearman":
        return _spearman(a, b)
    if statistic == "kendall":
        return _kendall_tau_b(a, b)
    return _pearson(a, b)


def _scipy_kendall_tau_b(x: FloatArray, y: FloatArray) -> float:
    """scipy's kendalltau without its NaN-policy and broadcasting wrapper (the same function). scipy
    is imported here, not with this module: the demos' bootstraps never reach it, and importing
    scipy.stats cost each report stage about 0.5 s."""
    from scipy import stats

    kendalltau = getattr(stats.kendalltau, "__wrapped__", stats.kendalltau)
    return float(kendalltau(x, y, variant="b").statistic)


# Up to this many values, Kendall's tau-b is counted over every pair at once (n(n-1)/2 signs, 20 MB
# at the limit); past it, scipy's O(n log n) count.
PAIRWISE_KENDALL_LIMIT = 1500


def _kendall_tau_b(x: FloatArray, y: FloatArray) -> float:
    """scipy.stats.kendalltau(x, y, variant="b").statistic for two non-constant 1-D arrays, without
    its p-value (the exact one, for small samples without ties, was most of each call): the same
    whole numbers (concordant minus discordant pairs, pairs not tied in x, in y), counted over every
    pair, and the same float operations on them (a quotient of two square roots, clipped to [-1, 1]),
    so to the last bit the same (tested). Non-finite or many values: scipy's own."""
    n = x.size
    if n > PAIRWISE_KENDALL_LIMIT or not (np.isfinite(x).all() and np.isfinite(y).all()):
        return _scipy_kendall_tau_b(x, y)
    first, second = np.triu_indices(n, k=1)
    x_signs = np.sign(x[second] - x[first]).astype(np.int8)  # a - b == 0 only when a == b (finite)
    y_signs = np.sign(y[second] - y[first]).astype(np.int8)
    con_minus_dis = int(np.dot(x_signs.astype(np.int64), y_signs))
    untied_x, untied_y = int(np.count_nonzero(x_signs)), int(np.count_nonzero(y_signs))
    if untied_x == 0 or untied_y == 0:
        return math.nan
    tau = con_minus_dis / np.sqrt(untied_x) / np.sqrt(untied_y)
    return float(np.minimum(1.0, max(-1.0, tau)))


def average_ranks(values: FloatArray) -> FloatArray:
    """scipy.stats.rankdata(values) ("average": ties share the mean of their ranks); every rank is a
    whole or half number, exact in float64, so any correct computation gives the same array."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.empty(ordered.size, dtype=bool)
    starts[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=starts[1:])
    tie_group = np.cumsum(starts)
    bounds = np.append(np.flatnonzero(starts), ordered.size)
    ranks = np.empty(ordered.size, dtype=np.float64)
    ranks[order] = 0.5 * (bounds[tie_group] + bounds[tie_group - 1] + 1)
    return ranks


def _pearson(x: FloatArray, y: FloatArray) -> float:
    """scipy.stats.pearsonr(x, y).statistic for two non-constant 1-D float arrays, computed with the
    numpy operations scipy 1.17 applies to them (scaled norms, vecdot, clip; exactly +-1 for two
    points), without its array-API dispatch and p-value: to the last bit the same (tested), seven
    times faster. Where numpy has no vecdot (numpy < 2), scipy's own."""
    if not hasattr(np, "vecdot"):
        from scipy import stats

        return float(stats.pearsonr(x, y).statistic)
    xm, ym = x - np.mean(x, axis=-1, keepdims=True), y - np.mean(y, axis=-1, keepdims=True)
    xmax = np.max(np.abs(xm), axis=-1, keepdims=True)
    ymax = np.max(np.abs(ym), axis=-1, keepdims=True)
    normxm = xmax * np.linalg.norm(xm / xmax, ord=2, axis=-1, keepdims=True)
    normym = ymax * np.linalg.norm(ym / ymax, ord=2, axis=-1, keepdims=True)
    r = np.clip(np.vecdot(xm / normxm, ym / normym), -1.0, 1.0)  # over the last axis, as scipy asks
    return float(np.round(r) if x.size == 2 else r)


def _spearman(a: FloatArray, b: FloatArray) -> float:
    """scipy.stats.spearmanr(a, b).statistic, computed as it computes it (the ranks' np.corrcoef, on
    the same memory layout: its ranks are the columns of a transposed array), without its checks
    and p-value: to the last bit the same, four times faster."""
    ranked = np.vstack((average_ranks(a), average_ranks(b))).T
    matrix: FloatArray = np.asarray(np.corrcoef(ranked, rowvar=False))
    return float(matrix[1, 0])


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


class _Table:
    """The pairs as arrays, groups and systems as indices."""

    def __init__(self, pairs: Sequence[Pair]) -> None:
        if not pairs:
            raise ValueError("no pairs to correlate")
        self.groups = sorted({p.group for p in pairs})
        self.systems = sorted({p.system for p in pairs})
        group_index = {g: i for i, g in enumerate(self.groups)}
        system_index = {s: i for i, s in enumerate(self.systems)}
        self.group: IntArray = np.array([group_index[p.group] for p in pairs], dtype=np.int64)
        self.system: IntArray = np.array([system_index[p.system] for p in pairs], dtype=np.int64)
        self.judge: FloatArray = np.array([p.judge for p in pairs], dtype=np.float64)
        self.human: FloatArray = np.array([p.human for p in pairs], dtype=np.float64)
        if not (np.isfinite(self.judge).all() and np.isfinite(self.human).all()):
            raise ValueError("a judge score or a human rating is not a finite number")


def _summary_per_group(table: _Table) -> tuple[dict[Statistic, FloatArray], dict[str, int]]:
    """Each group's correlation (NaN where skipped), and the skipped groups by reason."""
    per_group = {s: np.full(len(table.groups), np.nan) for s in STATISTICS}
    skipped = {"fewer than 2 items": 0, "constant judge scores": 0, "constant human ratings": 0}
    for g in range(len(table.groups)):
        rows = table.group == g
        judge, human = table.judge[rows], table.human[rows]
        if judge.size < 2:
            skipped["fewer than 2 items"] += 1
        elif np.ptp(judge) == 0:
            skipped["constant judge scores"] += 1
        elif np.ptp(human) == 0:
            skipped["constant human ratings"] += 1
        else:
            for statistic in STATISTICS:
                per_group[statistic][g] = correlation(statistic, judge, human)
    return per_group, skipped


def _weighted_mean(values: FloatArray, weights: IntArray) -> float:
    used = np.isfinite(values) & (weights > 0)
    total = weights[used].sum()
    return float((values[used] * weights[used]).sum() / total) if total else math.nan


def _system_means(table: _Table, weights: IntArray) -> tuple[FloatArray, FloatArray]:
    row_weights = weights[table.group].astype(np.float64)
    counts = np.bincount(table.system, weights=row_weights, minlength=len(table.systems))
    judge = np.bincount(table.system, weights=row_weights * table.judge, minlength=len(table.systems))
    human = np.bincount(table.system, weights=row_weights * table.human, minlength=len(table.systems))
    present = counts > 0
    return judge[present] / counts[present], human[present] / counts[present]


def _level_values(
    table: _Table, per_group: Mapping[Statistic, FloatArray], weights: IntArray
) -> dict[tuple[Level, Statistic], float]:
    """Every level's statistics on the groups drawn `weights` times each (all ones: the data)."""
    values: dict[tuple[Level, Statistic], float] = {}
    system_judge, system_human = _system_means(table, weights)
    row_repeats = weights[table.group]
    global_judge, global_human = np.repeat(table.judge, row_repeats), np.repeat(table.human, row_repeats)
    for statistic in STATISTICS:
        values["summary", statistic] = _weighted_mean(per_group[statistic], weights)
        values["system", statistic] = correlation(statistic, system_judge, system_human)
        values["global", statistic] = correlation(statistic, global_judge, global_human)
    return values


def correlate(
    pairs: Sequence[Pair], *, resamples: int = 1000, seed: int = 0, confidence: float = 0.95
) -> dict[Level, LevelResult]:
    """Summary-, system- and global-level correlations with group-bootstrap intervals."""
    table = _Table(pairs)
    per_group, skipped = _summary_per_group(table)
    point = _level_values(table, per_group, np.ones(len(table.groups), dtype=np.int64))
    rows, which = distinct_resamples(group_resamples(len(table.groups), resamples, seed))
    distinct = [_level_values(table, per_group, w) for w in rows]
    draws = [distinct[i] for i in which]
    units: dict[Level, int] = {
        "summary": len(table.groups) - sum(skipped.values()),
        "system": len(table.systems),
        "global": len(pairs),
    }
    results: dict[Level, LevelResult] = {}
    for level in LEVELS:
        estimates: dict[Statistic, Estimate] = {}
        for statistic in STATISTICS:
            low, high, undefined = percentile_interval([d[level, statistic] for d in draws], confidence)
            estimates[statistic] = Estimate(point[level, statistic], low, high, undefined)
        results[level] = LevelResult(level, units[level], skipped if level == "summary" else {}, estimates)
    return results


# --- Krippendorff's alpha -----------------------------------------------------------------------


def alpha_undefined(ratings_per_unit: Sequence[Sequence[float | None]]) -> str | None:
    """Why Krippendorff's alpha is undefined over these units, or None where it is defined.

    Alpha compares the values given to one unit by different raters, so only units with two or
    more ratings count; with one rater per item (the most common annotation design) there is no
    such unit, and agreement between raters is not low but unmeasured."""
    pairable = [[v for v in unit if v is not None] for unit in ratings_per_unit]
    pairable = [unit for unit in pairable if len(unit) >= 2]
    if not pairable:
        return (
            "no item has two or more ratings (one rating per item), so agreement between raters is undefined"
        )
    if len({v for unit in pairable for v in unit}) < 2:
        return (
            "every item rated twice or more got one and the same value, so there is no variation to measure"
        )
    return None


def ordinal_alpha(ratings_per_unit: Sequence[Sequence[float | None]]) -> float:
    """Krippendorff's alpha (ordinal) over units each rated by any number of raters (None: missing).

    Which rater gave which value does not enter alpha, only the values within each unit, so raters
    need not be the same people across units. NaN where it is undefined (`alpha_undefined` says why)."""
    if alpha_undefined(ratings_per_unit) is not None:
        return math.nan
    return krippendorff_alpha(ratings_per_unit, "ordinal")


def judge_human_alpha(judge: Sequence[float], human: Sequence[float]) -> float:
    """Alpha (ordinal) between the judge and the mean human rating, as two raters of each item."""
    if len(judge) != len(human):
        raise ValueError("judge and human ratings differ in length")
    return ordinal_alpha([(j, h) for j, h in zip(judge, human, strict=True)])


# --- binary labels (the RAG judge) ---------------------------------------------------------------


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
