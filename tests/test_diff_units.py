"""`judgeloop diff`'s tests count items, not judgements: an item judged at several iterations of
the loop gives several pairs, which are not independent (the same item, the same transcript, each
revision made from the last). The bootstrap already resamples items; the signed-rank test and
McNemar's must take one observation per item too, or ten iterations of one item pass for ten items."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.experiments.judgements import Judgement
from pipeline.tools.diff.runs import Run
from pipeline.tools.diff.summary import RoundDiff, summarise


def _judgement(item: str, iteration: int, score: float) -> Judgement:
    return Judgement("paper", item, iteration, "accuracy", score, score > 3, threshold=3)


def _runs(pairs: dict[tuple[str, int], tuple[float, float]]) -> tuple[Run, Run]:
    sides = []
    for side in (0, 1):
        judged = [_judgement(item, it, scores[side]) for (item, it), scores in pairs.items()]
        sides.append(Run("AB"[side], {j.pair_key: j for j in judged}, {}))
    return sides[0], sides[1]


def _only_round(pairs: dict[tuple[str, int], tuple[float, float]]) -> RoundDiff:
    """The one round of the one metric the pairs make."""
    ((row,),) = (metric.rounds for metric in summarise(*_runs(pairs), resamples=200)[0])
    return row


def test_one_item_judged_at_ten_iterations_is_one_observation() -> None:
    # Item 1 moved up at all ten of its iterations, item 2 at its one: two items, both up. Two signs
    # out of two: p = 0.5 whatever the tests; counted as eleven pairs, p came out near 0.001.
    # (The later rounds, iterations 1 to 10: round 0 is reported apart.)
    pairs = {("1", it): (3.0, 5.0) for it in range(1, 11)} | {("2", 1): (4.0, 5.0)}
    rows, changes = summarise(*_runs(pairs), resamples=200)
    (metric,) = rows
    assert metric.paired == metric.changed == len(changes) == 11
    (row,) = metric.rounds
    assert (row.name, row.first, row.last, row.paired) == ("1+", 1, 10, 11)
    assert row.score_test is not None and row.score_test.n == 2
    assert row.score_test.p_value == 0.5
    assert row.pass_test is not None and row.pass_test.n == 1  # item 2 passes in both; item 1 flips
    assert row.pass_test.p_value == 1.0


def test_an_item_s_flips_both_ways_cancel_in_mcnemar_s_count() -> None:
    # Item 1 passes→fails at iteration 0 and fails→passes at 1: no net move. Items 2-6 flip up once.
    pairs = {("1", 1): (4.0, 2.0), ("1", 2): (2.0, 4.0)} | {(str(i), 1): (2.0, 4.0) for i in range(2, 7)}
    rows, _ = summarise(*_runs(pairs), resamples=200)
    (metric,) = rows
    assert (metric.pass_to_fail, metric.fail_to_pass) == (1, 6)  # the judgements, as listed
    (row,) = metric.rounds
    assert row.pass_test is not None and row.pass_test.n == 5  # the items that moved, net
    assert row.pass_test.p_value == 2 / 32
    assert row.score_test is not None and row.score_test.n == 5  # item 1's mean difference is 0


def test_no_verdict_moved_is_no_mcnemar_test_and_no_share_of_holm_s() -> None:
    # Every score moved, no verdict: McNemar's p = 1 of no pair was printed (n = 0) and counted as
    # one more test in Holm's adjustment of the others.
    pairs = {(str(i), 0): (4.0, 5.0) for i in range(6)}
    rows, _ = summarise(*_runs(pairs), resamples=200)
    ((row,),) = (r.rounds for r in rows)
    assert row.noise is None  # asked once in both runs: no repeat-noise test either
    assert row.pass_test is None and row.pass_holm is None
    assert row.score_test is not None and row.score_holm == row.score_test.p_value == 2 / 64


def test_one_item_has_a_mean_and_no_interval() -> None:
    # Every resample of one item is that item: a "95% CI" of no width, which said nothing.
    from pipeline.tools.diff.text import interval

    rows, _ = summarise(*_runs({("1", 1): (2.0, 4.0), ("1", 2): (3.0, 4.0)}), resamples=200)
    assert interval(rows[0].rounds[0].mean) == "mean B−A +1.500 (one item: no interval)"


keys = st.tuples(st.sampled_from("abcdef"), st.integers(0, 3), st.sampled_from(["m1", "m2"]))
scores = st.one_of(st.none(), st.integers(1, 5).map(float))


@given(st.dictionaries(keys, scores, max_size=30), st.dictionaries(keys, scores, max_size=30))
@settings(max_examples=100, deadline=None)
def test_every_judgement_is_paired_or_one_run_s_alone(
    old: dict[tuple[str, int, str], float | None], new: dict[tuple[str, int, str], float | None]
) -> None:
    def run(name: str, judged: dict[tuple[str, int, str], float | None]) -> Run:
        made = [
            Judgement("paper", item, it, metric, score, None if score is None else score > 3)
            for (item, it, metric), score in judged.items()
        ]
        return Run(name, {j.pair_key: j for j in made}, {})

    rows, changes = summarise(run("A", old), run("B", new), resamples=100)
    both = old.keys() & new.keys()
    assert sum(r.paired for r in rows) == len(both)
    assert sum(r.only_a for r in rows) == len(old.keys() - new.keys())
    assert sum(r.only_b for r in rows) == len(new.keys() - old.keys())
    assert {(c.a.item, c.a.iteration, c.a.metric) for c in changes} == {k for k in both if old[k] != new[k]}
    assert all(c.b.pair_key == c.a.pair_key for c in changes)


def test_sample_means_that_are_the_same_difference_tie_and_cancel() -> None:
    # judge.samples > 1 stores a score as its samples' mean to 6 decimals (3.666667): the same
    # difference of +0.666667 taken at 4 and at 3 differs in its last bit (…0003 against …9999).
    # Taken as they are, the three items' equal moves were ranked 2.5, 2.5 and 1 rather than tied
    # (p = 0.5 for what is p = 1: every one of the 8 sign patterns of three tied ranks is at least as
    # extreme), and an item whose two moves cancel was a non-zero difference of -2e-16, one more item.
    tied = {("1", 0): (4.0, 4.666667), ("2", 0): (4.0, 4.666667), ("3", 0): (3.666667, 3.0)}
    row = _only_round(tied)
    assert row.score_test is not None and row.score_test.n == 3
    assert row.score_test.p_value == 1.0
    cancelled = {("1", 1): (3.0, 3.666667), ("1", 2): (4.666667, 4.0)}
    moved = {(str(i), 1): (2.0, 3.0) for i in (2, 3)}
    row = _only_round(cancelled | moved)
    assert row.score_test is not None and row.score_test.n == 2  # item 1's mean difference is 0
    assert row.score_test.p_value == 0.5


def test_the_text_says_that_n_leaves_out_the_items_that_did_not_move() -> None:
    # Wilcoxon's treatment of zero differences: an item whose mean difference is 0 is dropped, so
    # "n = 2 items" beside "paired 5" must say why the other three are not counted.
    from pipeline.tools.diff.text import render

    pairs = {("1", 0): (2.0, 4.0), ("2", 0): (2.0, 5.0)} | {(str(i), 0): (3.0, 3.0) for i in (3, 4, 5)}
    rows, changes = summarise(*_runs(pairs), resamples=200)
    shown = render(["A", "B"], rows, changes)
    assert "(n = 2 items)" in shown and "paired 5" in shown
    assert "an item that did not move is left out" in shown
    assert all(len(line) <= 100 for line in shown.splitlines())


def test_the_json_states_its_statistics_at_the_project_s_precision() -> None:
    # pipeline.numbers: what numpy computes (the bootstrap's sums and quantiles, kappa's sums) may
    # differ in its last bit between numpy releases and the CPU kernels they dispatch to, so what is
    # written is rounded to SIGNIFICANT digits; --json wrote every float's 17 digits.
    from pipeline.numbers import stated
    from pipeline.tools.diff.as_json import as_json

    # 21 items, 7 moved by one: a mean of 1/3, and a bootstrap (past the exact interval's 15 items).
    pairs = {(str(i), 0): (2.0, 3.0 if i < 7 else 2.0) for i in range(21)}
    rows, changes = summarise(*_runs(pairs), resamples=200)
    (metric,) = as_json(["A", "B"], rows, changes)["metrics"]
    (part,) = metric["rounds"]
    interval = part["mean_difference"]
    assert interval["method"] == "bootstrap"
    written = [interval[k] for k in ("estimate", "low", "high", "confidence")]
    written += [part["quadratic_kappa"], part["exact_agreement"]]
    written += [part["score_test"]["p_value"], part["score_test"]["p_holm"]]
    assert part["mean_difference"]["estimate"] == stated(1 / 3) != 1 / 3
    assert all(value == stated(value) for value in written)
