"""Whether two runs' scores differ by more than the judge's own repeat noise (`judgeloop diff`).

Where a run asked the judge several times per judgement (judge.samples > 1), the spread of those
samples is how far the judge moves when asked the same thing again. Two measures of the change
against it, over the pairs of one metric's round (each pair: A's samples and B's of one judgement):

- the noise's standard error of the change: how far the mean change would move if each judgement
  were asked again as often, from each run's within-judgement sample variance (pooled over its
  judgements; a run that asked once has none of its own, and is taken to be as noisy as the other);
- a permutation test of the samples: under "the change is repeat noise", a judgement's A and B
  samples are draws of one judge's scores, so any split of them into A's and B's (as many as each
  had) is as likely as the one observed. Split within each pair; the statistic is the mean over
  items of their pairs' (mean of B's samples - mean of A's); the two-sided p is twice the smaller
  tail (the share of splits at least, or at most, the observed: scipy's permutation_test's rule,
  as the McNemar and signed-rank tests here), capped at 1. A pair whose samples are all one score
  adds 0 to every split, so only the others are split: exact (every split) up to EXACT_SPLITS,
  past it seeded Monte Carlo draws, each tail (1 + as far) / (1 + draws): valid at any number;
  past NORMAL_PAST such pairs, the normal approximation with the splits' exact variance (counted
  over every pair, a thousand unmoving ones and one that moved made a normal of a 4-point law).

Needs no model and no rerun; what it cannot tell apart is a run whose judge is deterministic
(temperature 0: one sample is all its samples) from one that happened to be asked once.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.numbers import fsum
from pipeline.stats.bootstrap import FloatArray

EXACT_SPLITS = 2**16  # splits of every pair together enumerated; past it, Monte Carlo draws
DRAWS = 10_000
# Past this many pairs whose samples differ, the normal approximation of the permutation distribution
# (its exact mean, 0, and variance): a sum of that many independent splits is close to normal, and
# the draws' cost grows with the pairs (10,000 pairs: 4.3 CPU s; bench/diff_intervals.py). A pair
# whose samples are all equal is no split at all (each of its splits is 0): it never counts here.
NORMAL_PAST = 1000
# Two splits whose statistic is the same number may sum it in another order: "at least as far"
# allows this much (relative), far below any difference of scores.
TOLERANCE = 1e-9


@dataclass(frozen=True)
class SampledPair:
    """One judgement's samples in A and in B (scored ones), and its item (the unit of the mean)."""

    item: str
    a: tuple[float, ...]
    b: tuple[float, ...]


@dataclass(frozen=True)
class RepeatNoise:
    pairs: int  # the pairs used: those with at least two samples in one run
    items: int
    change: float  # the mean over items of their pairs' mean change in the samples' means
    noise_se: float  # the change's standard error from the judge's repeat noise alone
    sd_a: float | None  # A's pooled within-judgement SD (None: asked once, taken as B's)
    sd_b: float | None
    p_value: float
    method: str  # "exact", "Monte Carlo" or "normal approx."
    splits: int  # exact: every split counted; Monte Carlo: the draws; normal approx.: 0
    seed: int  # Monte Carlo's

    @property
    def ratio(self) -> float | None:
        """The change in units of its repeat-noise SE, signed as the change (the text's "= -0.1 SE";
        None: no noise measured, every sample equal)."""
        return None if self.noise_se == 0 else self.change / self.noise_se


def _variance(values: tuple[float, ...]) -> float:
    """The sample variance, in fsum: the same float on every Python (statistics' differs by release)."""
    centre = fsum(values) / len(values)
    return fsum((v - centre) ** 2 for v in values) / (len(values) - 1)


def _pooled_sd(samples: Sequence[tuple[float, ...]]) -> float | None:
    """A run's within-judgement SD: the root of its judgements' mean sample variance."""
    variances = [_variance(s) for s in samples if len(s) >= 2]
    return math.sqrt(fsum(variances) / len(variances)) if variances else None


def _weights(pairs: Sequence[SampledPair]) -> list[float]:
    """Each pair's weight in the mean over items of their pairs' mean."""
    per_item: dict[str, int] = {}
    for pair in pairs:
        per_item[pair.item] = per_item.get(pair.item, 0) + 1
    return [1 / (len(per_item) * per_item[pair.item]) for pair in pairs]


def _splits(pair: SampledPair) -> FloatArray:
    """The pair's change (mean of B's part - mean of A's) for every split of its samples into
    len(a) and len(b), the observed one (A's samples first) first."""
    pooled = np.asarray(pair.a + pair.b, dtype=float)
    total, k = float(pooled.sum()), len(pair.a)
    chosen = np.asarray(list(itertools.combinations(range(len(pooled)), k)), dtype=np.int64)
    in_a: FloatArray = pooled[chosen].sum(axis=1)
    changes: FloatArray = (total - in_a) / len(pair.b) - in_a / k
    return changes


def _tails(values: FloatArray, observed: float) -> tuple[int, int]:
    """How many of `values` are at least `observed`, and how many at most (TOLERANCE says why)."""
    slack = TOLERANCE * max(1.0, abs(observed))
    return int(np.count_nonzero(values >= observed - slack)), int(
        np.count_nonzero(values <= observed + slack)
    )


def _exact(pairs: Sequence[SampledPair], weights: Sequence[float]) -> tuple[float, float]:
    every = np.zeros(1)
    for pair, weight in zip(pairs, weights, strict=True):
        every = (every[:, None] + weight * _splits(pair)[None, :]).ravel()
    observed = float(every[0])  # each pair's first split is the observed one
    above, below = _tails(every, observed)
    return observed, 2 * min(above, below) / every.size


def _drawn(
    pairs: Sequence[SampledPair], weights: Sequence[float], draws: int, seed: int
) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    drawn = np.zeros(draws)
    observed = 0.0
    for pair, weight in zip(pairs, weights, strict=True):
        pooled = np.asarray(pair.a + pair.b, dtype=float)
        total, k = float(pooled.sum()), len(pair.a)
        in_a = rng.permuted(np.tile(pooled, (draws, 1)), axis=1)[:, :k].sum(axis=1)
        drawn += weight * ((total - in_a) / len(pair.b) - in_a / k)
        observed += weight * ((total - float(pooled[:k].sum())) / len(pair.b) - float(pooled[:k].sum()) / k)
    above, below = _tails(drawn, observed)
    return observed, 2 * (1 + min(above, below)) / (1 + draws)


def split_variance(pair: SampledPair) -> float:
    """The variance of the pair's change over its splits: with n samples pooled (population variance
    s2) and k of them A's, the mean of a random k of them varies by s2 / k * (n - k) / (n - 1), and
    the change is n / len(b) times it (less a constant): n^2 s2 / (len(a) len(b) (n - 1))."""
    pooled = pair.a + pair.b
    n = len(pooled)
    centre = fsum(pooled) / n
    s2 = fsum((v - centre) ** 2 for v in pooled) / n
    return n * n * s2 / (len(pair.a) * len(pair.b) * (n - 1))


def _normal(pairs: Sequence[SampledPair], weights: Sequence[float]) -> tuple[float, float]:
    observed = fsum(
        w * (fsum(p.b) / len(p.b) - fsum(p.a) / len(p.a)) for p, w in zip(pairs, weights, strict=True)
    )
    variance = fsum(w * w * split_variance(p) for p, w in zip(pairs, weights, strict=True))
    if variance == 0:
        return observed, 1.0
    return observed, math.erfc(abs(observed) / math.sqrt(2 * variance))


def _permutation(
    used: Sequence[SampledPair], weights: Sequence[float], draws: int, seed: int
) -> tuple[float, float, str, int]:
    """The change, its permutation p, the method and the splits counted (exact) or drawn."""
    # A pair whose samples are all one score: every split of it is 0 (its change too), so it adds
    # nothing to the permutation distribution; left out there, exactly, and never counted as a split.
    varied = [(p, w) for p, w in zip(used, weights, strict=True) if len(set(p.a + p.b)) > 1]
    moving, moving_weights = [p for p, _ in varied], [w for _, w in varied]
    splits = math.prod(math.comb(len(p.a) + len(p.b), len(p.a)) for p in moving)
    if splits <= EXACT_SPLITS:
        return (*_exact(moving, moving_weights), "exact", splits)
    if len(moving) > NORMAL_PAST:
        return (*_normal(moving, moving_weights), "normal approx.", 0)
    return (*_drawn(moving, moving_weights, draws, seed), "Monte Carlo", draws)


def repeat_noise(pairs: Sequence[SampledPair], *, draws: int = DRAWS, seed: int = 0) -> RepeatNoise | None:
    """The change against the judge's repeat noise over `pairs`; None where no pair has two
    samples in either run (repeat noise unknown: nothing measured it)."""
    used = [p for p in pairs if p.a and p.b and max(len(p.a), len(p.b)) >= 2]
    if not used:
        return None
    weights = _weights(used)
    sd_a, sd_b = _pooled_sd([p.a for p in used]), _pooled_sd([p.b for p in used])
    var_a = (sd_a if sd_a is not None else sd_b or 0.0) ** 2
    var_b = (sd_b if sd_b is not None else sd_a or 0.0) ** 2
    se = math.sqrt(
        fsum(w * w * (var_a / len(p.a) + var_b / len(p.b)) for p, w in zip(used, weights, strict=True))
    )
    change, p_value, method, counted = _permutation(used, weights, draws, seed)
    items = len({p.item for p in used})
    return RepeatNoise(len(used), items, change, se, sd_a, sd_b, min(1.0, p_value), method, counted, seed)
