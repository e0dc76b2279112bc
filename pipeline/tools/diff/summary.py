"""Two runs' judgements paired by (design, item, iteration, metric), and per design and metric:
how many changed, flipped across the pass threshold, were judged in one run only, and why each
judgement changed (pipeline.tools.diff.causes); and, for round 0 and for the later rounds apart
(ROUNDS), the mean difference over items with its interval, the paired tests, the change against
the judge's repeat noise, and the two runs' agreement. The statistics are pipeline.stats.paired's
and pipeline.stats.repeat_noise's.

Round 0 is the first judgement of what was judged before any revision: where both runs judged the
same input there, only the judge can have moved the score. A later round judges a revision made
after the judge's feedback, so a changed judge changes its input too: pooled, the two questions
("did the judge change?" and "did the loop's outcome change?") would be answered as one.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from pipeline.experiments.judgements import Judgement
from pipeline.numbers import fsum
from pipeline.stats.paired import (
    Interval,
    TestResult,
    exact_agreement,
    holm,
    mcnemar_exact,
    mean_interval,
    quadratic_kappa,
    wilcoxon_signed_rank,
)
from pipeline.stats.repeat_noise import RepeatNoise, SampledPair, repeat_noise
from pipeline.stats.stability import Stability, stability
from pipeline.tools.diff.causes import Cause, cause_of
from pipeline.tools.diff.runs import Run

RESAMPLES = 2000
SEED = 0
# An item's mean difference is ranked at 1e-9: a score that is its samples' mean is stored to 6
# decimals (pipeline.judges.samples: 3.666667), and the same difference taken at two levels differs
# in its last bit (4.666667 - 4 against 3.666667 - 3), which parted tied ranks and left an item whose
# moves cancel a non-zero difference of 2e-16. Far below any difference a 6-decimal score can make.
DIFFERENCE_DECIMALS = 9


@dataclass(frozen=True)
class Change:
    a: Judgement
    b: Judgement
    cause: Cause

    @property
    def flip(self) -> str | None:
        """ "pass→fail" or "fail→pass" where the verdict crossed the threshold."""
        if self.a.passed is None or self.b.passed is None or self.a.passed == self.b.passed:
            return None
        return "pass→fail" if self.a.passed else "fail→pass"


# Round 0 apart from the rest: (name, its first iteration, its last; None: no end).
ROUNDS = (("0", 0, 0), ("1+", 1, None))


@dataclass
class RoundDiff:
    """One metric's pairs at round 0, or at the later rounds, and their statistics (the item is the
    unit of each). `inputs`: pairs whose judged input was the same in both runs, changed, unknown
    (one run's results name none), or fixed data (neither names one: not compared)."""

    name: str
    first: int = 0  # the iterations its pairs span
    last: int = 0
    paired: int = 0
    changed: int = 0
    moved: int = 0  # pairs whose score moved (a verdict may move alone: another threshold)
    inputs: Counter[str] = field(default_factory=Counter)
    scored: int = 0  # pairs with a score in both runs: what the score statistics use
    verdicts: int = 0  # pairs with a verdict in both runs: what McNemar uses
    mean: Interval | None = None
    score_test: TestResult | None = None
    pass_test: TestResult | None = None
    noise: RepeatNoise | None = None  # None: no sample repeated in either run, noise unknown
    # Each test's p-value adjusted (Holm) for every test of the diff: several metrics are tested at once.
    score_holm: float | None = None
    pass_holm: float | None = None
    noise_holm: float | None = None
    agreement: float | None = None
    kappa: float | None = None


@dataclass
class MetricDiff:
    design: str
    metric: str
    paired: int = 0
    changed: int = 0
    pass_to_fail: int = 0
    fail_to_pass: int = 0
    only_a: int = 0
    only_b: int = 0
    alone: dict[str, list[Judgement]] = field(default_factory=lambda: {"a": [], "b": []})  # listed in --json
    rounds: list[RoundDiff] = field(default_factory=list)  # round 0, then the later rounds
    causes: Counter[str] = field(default_factory=Counter)
    # judge.samples > 1 in a run: how its judge's samples spread (pipeline.stats.stability), A's and B's.
    stability: dict[str, Stability] = field(default_factory=dict)

    @property
    def tested(self) -> bool:
        """Whether any round has a test (a p-value the diff's Holm family counts)."""
        return any(p.score_test or p.pass_test or p.noise for p in self.rounds)


def _changed(a: Judgement, b: Judgement) -> bool:
    return a.score != b.score or a.passed != b.passed


def _round_of(iteration: int) -> int:
    return next(
        i
        for i, (_, first, last) in enumerate(ROUNDS)
        if iteration >= first and (last is None or iteration <= last)
    )


def _input(a: Judgement, b: Judgement) -> str:
    """Whether the pair judged the same input (the same id in both), a changed one, one unknown (one
    run names none), or "fixed": neither names one, the design's judge reading its data as given
    (RAG, SummEval), which two runs may hold otherwise: nothing compared, so not called the same."""
    if a.upstream is None and b.upstream is None:
        return "fixed"
    if a.upstream == b.upstream:
        return "same"
    return "unknown" if a.upstream is None or b.upstream is None else "changed"


def _rounds(pairs: list[tuple[Judgement, Judgement]], seed: int, resamples: int) -> list[RoundDiff]:
    """The pairs split into ROUNDS (those with any pair), each with its statistics."""
    split: dict[int, list[tuple[Judgement, Judgement]]] = {}
    for a, b in pairs:
        split.setdefault(_round_of(a.iteration), []).append((a, b))
    found = []
    for index in sorted(split):
        mine = split[index]
        iterations = [a.iteration for a, _ in mine]
        part = RoundDiff(ROUNDS[index][0], min(iterations), max(iterations), len(mine))
        part.changed = sum(_changed(a, b) for a, b in mine)
        part.inputs.update(_input(a, b) for a, b in mine)
        _statistics(part, mine, seed, resamples)
        found.append(part)
    return found


def _statistics(row: RoundDiff, pairs: list[tuple[Judgement, Judgement]], seed: int, resamples: int) -> None:
    """The pairs' statistics, with the item as the unit of each: an item's judgements at several
    iterations are not independent (one transcript, each revision made from the last), so the
    mean and its interval are over items' mean differences, the signed-rank test ranks each item's
    mean difference, and McNemar's counts each item's flips netted (with one judgement per item,
    exactly McNemar's test)."""
    scored = [(a, b) for a, b in pairs if a.score is not None and b.score is not None]
    row.scored = len(scored)
    if scored:
        by_item: dict[str, list[float]] = {}
        for a, b in scored:
            by_item.setdefault(a.item, []).append(float(b.score) - float(a.score))  # type: ignore[arg-type]
        differences = [_item_difference(group) for group in by_item.values()]
        row.mean = mean_interval(differences, resamples=resamples, seed=seed)
        row.score_test = wilcoxon_signed_rank(differences)
        row.moved = sum(a.score != b.score for a, b in scored)
        if row.moved:  # no score moved: no change to set against the noise
            row.noise = repeat_noise([_sampled(a, b) for a, b in scored], seed=seed)
        old = [float(a.score) for a, _ in scored]  # type: ignore[arg-type]
        new = [float(b.score) for _, b in scored]  # type: ignore[arg-type]
        row.agreement, row.kappa = exact_agreement(old, new), quadratic_kappa(old, new)
    judged = [(a, b) for a, b in pairs if a.passed is not None and b.passed is not None]
    row.verdicts = len(judged)
    if judged:
        net: Counter[str] = Counter()
        for a, b in judged:
            net[a.item] += int(bool(a.passed)) - int(bool(b.passed))  # +1 pass→fail, -1 fail→pass
        moved = (sum(n > 0 for n in net.values()), sum(n < 0 for n in net.values()))
        row.pass_test = mcnemar_exact(*moved) if any(moved) else None  # none moved: nothing to test


def _samples(judgement: Judgement) -> tuple[float, ...]:
    """A judgement's scored samples; asked once, its score alone."""
    scored = tuple(float(s) for s in judgement.samples if s is not None)
    return scored or (float(judgement.score),)  # type: ignore[arg-type]


def _sampled(a: Judgement, b: Judgement) -> SampledPair:
    return SampledPair(a.item, _samples(a), _samples(b))


def _item_difference(differences: list[float]) -> float:
    """An item's mean difference, as the signed-rank test ranks it (DIFFERENCE_DECIMALS says why)."""
    return round(fsum(differences) / len(differences), DIFFERENCE_DECIMALS) + 0.0  # -0.0 -> 0.0


def _stability(row: MetricDiff, side: str, judgements: list[Judgement]) -> None:
    sampled = [j for j in judgements if len(j.samples) > 1]
    if sampled:
        rows = [[None if s is None else float(s) for s in j.samples] for j in sampled]
        row.stability[side] = stability(rows, sampled[0].threshold)


def summarise(
    a: Run, b: Run, *, seed: int = SEED, resamples: int = RESAMPLES
) -> tuple[list[MetricDiff], list[Change]]:
    """Per (design, metric) in the order first met, and every changed judgement."""
    rows: dict[tuple[str, str], MetricDiff] = {}
    pairs: dict[tuple[str, str], list[tuple[Judgement, Judgement]]] = {}
    changes: list[Change] = []
    for key in sorted(a.judgements.keys() | b.judgements.keys()):
        old, new = a.judgements.get(key), b.judgements.get(key)
        row = rows.setdefault((key[0], key[3]), MetricDiff(key[0], key[3]))
        if old is None or new is None:
            row.only_a += new is None
            row.only_b += old is None
            row.alone["a" if new is None else "b"].append(old or new)  # type: ignore[arg-type]
            continue
        row.paired += 1
        pairs.setdefault((key[0], key[3]), []).append((old, new))
        if _changed(old, new):
            change = Change(old, new, cause_of(old, new, a.calls, b.calls))
            changes.append(change)
            row.changed += 1
            row.causes[change.cause.kind] += 1
            row.pass_to_fail += change.flip == "pass→fail"
            row.fail_to_pass += change.flip == "fail→pass"
    for name, row in rows.items():
        row.rounds = _rounds(pairs.get(name, []), seed, resamples)
        for side, run in (("A", a), ("B", b)):
            _stability(row, side, [j for j in run.judgements.values() if (j.design, j.metric) == name])
    _adjust(list(rows.values()))
    return list(rows.values()), changes


def _adjust(rows: list[MetricDiff]) -> None:
    """Each test's Holm-adjusted p-value, over every test of the diff (each round's three, each metric's)."""
    found: list[tuple[RoundDiff, str, float]] = []
    for row in rows:
        for part in row.rounds:
            for name, test in (("score", part.score_test), ("pass", part.pass_test), ("noise", part.noise)):
                if test is not None:
                    found.append((part, name, test.p_value))
    for (part, name, _), adjusted in zip(found, holm([p for _, _, p in found]), strict=True):
        setattr(part, f"{name}_holm", adjusted)
