"""A statistician's review of `judgeloop diff` against the judge's repeat noise (review21): each
fault found, as a test that failed on the code merged from diff-noise.

- The permutation test split every pair, and counted every pair towards its normal approximation,
  even one whose samples are all one score (every split of it is 0). A thousand such pairs and one
  that moved made "a thousand pairs" of a normal approximation whose law was the one pair's: p =
  0.003 where the exact p, counted here by brute force, is 0.2.
- A round whose pairs judged the same input was titled "same input: only the judge changed": said
  of a round with no change, and of the selection's `selected`, which no judge call scores (its
  picks move with k and lambda). The same input says what a change is not, the input's.
- A pair where neither run names its input (RAG, SummEval: the judge reads its data as given) was
  counted "same input", though nothing was compared and two revisions may hold other data.
- A round's title past 100 columns was cut ("…"), losing its input counts: a later round of many
  pairs whose inputs were partly the same, partly changed, partly unknown.
- The JSON's repeat_noise "ratio" was the change's size in SEs, unsigned, beside the text's signed
  "= -0.1 SE" and its own docstring ("the change in units of its SE").
- The later rounds pair only what both runs went on to revise, each run's own judge's choice; the
  title said "revisions", as if they were every revision.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

from pipeline.experiments.judgements import Judgement
from pipeline.stats import repeat_noise as noise_module
from pipeline.stats.repeat_noise import SampledPair, repeat_noise
from pipeline.tools.diff.as_json import as_json
from pipeline.tools.diff.runs import Run
from pipeline.tools.diff.summary import summarise
from pipeline.tools.diff.text import render


def _one_pair_exact_p(a: tuple[float, ...], b: tuple[float, ...]) -> Fraction:
    """One pair's two-sided permutation p, every split counted in exact fractions."""
    pooled = [Fraction(v) for v in a + b]
    total = sum(pooled, Fraction(0))
    changes = []
    for in_a in itertools.combinations(range(len(pooled)), len(a)):
        part = sum((pooled[i] for i in in_a), Fraction(0))
        changes.append((total - part) / len(b) - part / len(a))
    observed = changes[0]
    above = sum(c >= observed for c in changes)
    below = sum(c <= observed for c in changes)
    return min(Fraction(1), Fraction(2 * min(above, below), len(changes)))


def test_pairs_whose_samples_are_all_one_score_do_not_make_the_test_a_normal_approximation() -> None:
    # NORMAL_PAST pairs that did not move (3 once in A, 3 thrice in B) and one that did: the
    # permutation law is that one pair's (ten splits), whatever the others' number.
    moved = SampledPair("moved", (1.0,), (5.0,) * 9)
    still = [SampledPair(str(i), (3.0,), (3.0, 3.0, 3.0)) for i in range(noise_module.NORMAL_PAST)]
    found = repeat_noise([*still, moved])
    assert found is not None
    assert _one_pair_exact_p(moved.a, moved.b) == Fraction(1, 5)
    assert found.method == "exact" and found.splits == 10
    assert found.p_value == 0.2  # the normal approximation over 1,001 "pairs" said 0.0027
    assert found.pairs == noise_module.NORMAL_PAST + 1  # the pairs used, still counted as used
    assert found.change == 4 / (noise_module.NORMAL_PAST + 1)  # the mean change over every item


def test_pairs_all_alike_leave_the_exact_p_unchanged() -> None:
    # Left out of the splits, exactly: the same p and change as with them enumerated.
    pairs = [SampledPair("x", (2.0,), (4.0, 3.0)), SampledPair("y", (1.0, 2.0), (3.0, 3.0))]
    alike = [SampledPair("z", (4.0,), (4.0, 4.0))]
    with_them, without = repeat_noise([*pairs, *alike]), repeat_noise(pairs)
    assert with_them is not None and without is not None
    assert with_them.p_value == without.p_value
    assert with_them.change == without.change * 2 / 3  # z counts as an item whose change is 0


def test_the_json_ratio_is_signed_as_the_change_and_the_text() -> None:
    found = repeat_noise([SampledPair("x", (4.0,), (3.0, 2.0)), SampledPair("y", (5.0,), (4.0, 5.0))])
    assert found is not None and found.change < 0
    assert found.ratio is not None and found.ratio == found.change / found.noise_se < 0


def _selected(name: str, picked: set[str], upstream: str = "pool") -> Run:
    made = [
        Judgement("selection", f"r/{i}", 0, "selected", 4.0, str(i) in picked, upstream=upstream)
        for i in range(6)
    ]
    return Run(name, {j.pair_key: j for j in made}, {})


def test_a_round_with_the_same_input_never_says_the_judge_changed() -> None:
    # The same pool of ratings, other picks (another k): no judge call moved anything.
    rows, changes = summarise(_selected("A", {"0", "1"}), _selected("B", {"0", "2"}), resamples=200)
    shown = render(["A", "B"], rows, changes)
    assert "round 0, before any revision: 6 paired, 2 changed; same input: no change is the input's" in shown
    assert "judge changed" not in shown
    # Nothing changed: the title says so, and nothing of a judge.
    rows, changes = summarise(_selected("A", {"0"}), _selected("B", {"0"}), resamples=200)
    assert "only the judge" not in render(["A", "B"], rows, changes)


def test_the_later_rounds_say_they_pair_only_what_both_runs_revised() -> None:
    def run(name: str, revised: range) -> Run:
        made = [Judgement("paper", str(i), 0, "accuracy", 2.0, False, upstream=f"a{i}") for i in range(4)]
        score = 3.0 if name == "A" else 4.0
        made += [
            Judgement("paper", str(i), 1, "accuracy", score, True, upstream=f"{name}{i}") for i in revised
        ]
        return Run(name, {j.pair_key: j for j in made}, {})

    rows, changes = summarise(run("A", range(4)), run("B", range(2)), resamples=200)
    shown = render(["A", "B"], rows, changes)
    assert "  later rounds (it1, both revised): 2 paired, 2 changed; input changed in all 2" in shown
    assert "later rounds (what both runs went on to revise)" in shown


def test_a_design_that_names_no_input_is_not_called_the_same_input() -> None:
    def run(name: str, score: float) -> Run:
        made = [Judgement("rag", f"row{i}", 0, "faithfulness", score, None) for i in range(6)]
        return Run(name, {j.pair_key: j for j in made}, {})

    rows, changes = summarise(run("A", 3.0), run("B", 4.0), resamples=200)
    shown = render(["A", "B"], rows, changes)
    assert "round 0, before any revision: 6 paired, 6 changed; input: fixed data, not compared" in shown
    assert "same input" not in shown
    (metric,) = as_json(["A", "B"], rows, changes)["metrics"]
    assert metric["rounds"][0]["input"] == {"same": 0, "changed": 0, "unknown": 0, "fixed": 6}


def test_a_long_round_title_is_broken_not_cut() -> None:
    def run(name: str) -> Run:
        made = [Judgement("paper", str(i), 0, "accuracy", 2.0, False, upstream=f"a{i}") for i in range(3)]
        for i in range(3):
            for it in range(1, 11):  # odd iterations: each run its own revision; even: the same text
                upstream = None if (i, it, name) == (0, 1, "B") else f"{name if it % 2 else 'x'}{i}{it}"
                score = 3.0 if name == "A" else 4.0
                made.append(Judgement("paper", str(i), it, "accuracy", score, True, upstream=upstream))
        return Run(name, {j.pair_key: j for j in made}, {})

    rows, changes = summarise(run("A"), run("B"), resamples=200)
    shown = render(["A", "B"], rows, changes).splitlines()
    assert "  later rounds (it1-10, both revised): 30 paired, 30 changed;" in shown
    at = shown.index("  later rounds (it1-10, both revised): 30 paired, 30 changed;")
    assert shown[at + 1] == "    input changed in 14, the same in 15, unknown in 1"
    assert all(len(line) <= 100 and not line.endswith("…") for line in shown)


def test_a_round_whose_sampled_pairs_all_held_one_score_has_one_split() -> None:
    # The score moved only where each run asked once; the sampled pair's samples are all 3, so
    # nothing is split: the exact p is 1 over the one (empty) split, said in the singular.
    def run(name: str, moved: float) -> Run:
        made = [
            Judgement("paper", "s", 0, "accuracy", 3.0, False, samples=(3.0, 3.0) if name == "B" else ()),
            Judgement("paper", "m", 0, "accuracy", moved, moved > 3),
        ]
        return Run(name, {j.pair_key: j for j in made}, {})

    rows, changes = summarise(run("A", 2.0), run("B", 4.0), resamples=200)
    (part,) = rows[0].rounds
    assert part.noise is not None and (part.noise.splits, part.noise.p_value) == (1, 1.0)
    assert "(exact, 1 split)" in render(["A", "B"], rows, changes)
