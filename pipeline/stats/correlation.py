"""How far a judge's scores agree with people's ratings: correlations on numbers in memory (no I/O).

They follow the summarization-evaluation literature (SummEval; G-Eval; Deutsch et al. 2021), where a
*group* is a source document and a *system* is what wrote the judged text:

    summary level   the correlation over one group's items, averaged over groups; a group where
                    either side is constant (or with fewer than 2 items) has no correlation, and
                    is skipped and counted, never counted as 0
    system level    the correlation over the systems' mean scores (judge means vs human means)
    global          the correlation over all items at once

Each with Spearman's rho, Kendall's tau-b (ties corrected) and Pearson's r, as scipy.stats computes
them, and a bootstrap percentile interval that resamples *groups* with replacement (the unit the data
were sampled in; pipeline.stats.bootstrap).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from pipeline.stats.bootstrap import (
    Estimate,
    FloatArray,
    IntArray,
    distinct_resamples,
    group_resamples,
    percentile_interval,
)

Statistic = Literal["spearman", "kendall", "pearson"]
STATISTICS: tuple[Statistic, ...] = ("spearman", "kendall", "pearson")
Level = Literal["summary", "system", "global"]
LEVELS: tuple[Level, ...] = ("summary", "system", "global")


@dataclass(frozen=True)
class Pair:
    """One judged item: its judge score and its human rating (the mean of the people's ratings)."""

    item: str
    group: str
    system: str
    judge: float
    human: float


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
