"""What `judgeloop diff`'s repeat-noise measures assume of a run that asked each judgement once:
that it is as noisy as the other run (pipeline.stats.repeat_noise). Simulated: 6 items, each with
its own true score; A asks once with its own SD, B three times with SD 1, the two runs' means equal
(no change at all). Per A's SD: the change's true SD over the runs, the SE the diff reports (root
mean square), and how often the permutation test says p <= 0.05.

    .venv/bin/python bench/diff_noise_assumed.py

A at SD 0 (temperature 0, greedy): the SE errs large, the test rarely fires. A at SD 1: as assumed.
A at SD 2 (asked once, at a higher temperature): the SE errs small and the test fires too often.
"""

from __future__ import annotations

import time

import numpy as np

from pipeline.stats.repeat_noise import SampledPair, repeat_noise

RUNS = 4000
ITEMS = 6


def _simulate(sd_a: float) -> tuple[float, float, float]:
    rng = np.random.default_rng(4)
    changes, ses, fired = [], [], 0
    for run in range(RUNS):
        truth = rng.normal(0, 1, ITEMS)
        once, thrice = truth + rng.normal(0, sd_a, ITEMS), truth[:, None] + rng.normal(0, 1, (ITEMS, 3))
        pairs = [SampledPair(str(i), (float(once[i]),), tuple(thrice[i].tolist())) for i in range(ITEMS)]
        found = repeat_noise(pairs, draws=500, seed=run)
        assert found is not None
        changes.append(found.change)
        ses.append(found.noise_se)
        fired += found.p_value <= 0.05
    return float(np.std(changes)), float(np.sqrt(np.mean(np.square(ses)))), fired / RUNS


def main() -> None:
    print("| A's SD | the change's true SD | reported SE (rms) | p <= 0.05 |")
    print("|---|---|---|---|")
    for sd_a in (0.0, 1.0, 2.0):
        started = time.process_time()
        true_sd, se, share = _simulate(sd_a)
        spent = time.process_time() - started
        print(f"| {sd_a:g} | {true_sd:.3f} | {se:.3f} | {share:.3f} | ({spent:.1f} CPU s)")


if __name__ == "__main__":
    main()
