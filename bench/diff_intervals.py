"""`judgeloop diff`'s interval for the mean change with few items, and the cost of its repeat-noise
test: why the diff gives up to 15 items the exact subset-means interval (pipeline.stats.paired)
rather than the percentile bootstrap, and what the permutation of samples costs
(pipeline.stats.repeat_noise).

    .venv/bin/python bench/diff_intervals.py

Coverage: the probability that a "95%" interval of n items holds the centre of the items'
difference. For the symmetric distributions (differences of 1-5 scores) every multiset of n values
is enumerated with its multinomial probability: exact, no simulation. For the skewed one (where the
exact interval's assumption fails), 4,000 seeded draws. Then repeat_noise over N pairs (A asked
once, B three times), CPU seconds.
"""

from __future__ import annotations

import itertools
import math
import time
from collections import Counter

import numpy as np

from pipeline.stats.paired import mean_interval, paired_bootstrap
from pipeline.stats.repeat_noise import SampledPair, repeat_noise

SYMMETRIC = {
    "{-1,0,1} .25/.5/.25": ([-1.0, 0.0, 1.0], [0.25, 0.5, 0.25], 0.0),
    "{-2..2} .1/.2/.4/.2/.1": ([-2.0, -1.0, 0.0, 1.0, 2.0], [0.1, 0.2, 0.4, 0.2, 0.1], 0.0),
    "{0..3} .1/.4/.4/.1": ([0.0, 1.0, 2.0, 3.0], [0.1, 0.4, 0.4, 0.1], 1.5),
}
SKEWED = ([0.0, 1.0, 4.0], [0.5, 0.3, 0.2])


def _covers(values: list[float], centre: float, method: str) -> bool:
    found = (
        paired_bootstrap([[v] for v in values], resamples=2000, seed=0)
        if method == "bootstrap"
        else mean_interval(values)
    )
    assert found is not None
    return found.low is not None and found.high is not None and found.low <= centre <= found.high


def enumerated(n: int, support: list[float], weights: list[float], centre: float, method: str) -> float:
    covered = 0.0
    for drawn in itertools.combinations_with_replacement(range(len(support)), n):
        probability = float(math.factorial(n))
        for index, count in Counter(drawn).items():
            probability *= weights[index] ** count / math.factorial(count)
        covered += probability * _covers([support[i] for i in drawn], centre, method)
    return covered


def simulated(n: int, method: str, trials: int = 4000) -> float:
    support, weights = SKEWED
    centre = float(np.dot(support, weights))
    rng = np.random.default_rng(1)
    return (
        sum(_covers(list(rng.choice(support, n, p=weights)), centre, method) for _ in range(trials)) / trials
    )


def main() -> None:
    sizes = (6, 8, 10, 12, 15)
    print("| distribution | interval | " + " | ".join(f"n={n}" for n in sizes) + " |")
    print("|---|---|" + "---|" * len(sizes))
    for name, (support, weights, centre) in SYMMETRIC.items():
        for method in ("bootstrap", "exact"):
            found = [enumerated(n, support, weights, centre, method) for n in sizes]
            print(f"| {name} | {method} | " + " | ".join(f"{c:.3f}" for c in found) + " |")
    for method in ("bootstrap", "exact"):
        found = [simulated(n, method) for n in sizes]
        print(
            f"| skewed {{0,1,4}} .5/.3/.2 (4,000 draws) | {method} | "
            + " | ".join(f"{c:.3f}" for c in found)
            + " |"
        )
    rng = np.random.default_rng(2)
    for pairs in (100, 1000, 10_000, 100_000):
        made = [
            SampledPair(str(i), (float(rng.integers(1, 6)),), tuple(float(v) for v in rng.integers(1, 6, 3)))
            for i in range(pairs)
        ]
        start = time.process_time()
        noise = repeat_noise(made)
        assert noise is not None
        print(f"repeat_noise over {pairs} pairs ({noise.method}): {time.process_time() - start:.2f} CPU s")


if __name__ == "__main__":
    main()
