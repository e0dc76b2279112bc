"""`judgeloop diff` reports round 0 apart from the later rounds. Round 0 judges what was written
before any revision: where both runs judged the same input there, only the judge moved the score.
A later round judges each run's own revision, made after its judge's feedback, so its input moved
too. Pooled, a judge that scores one point higher (round 0) and revisions it made worse (later
rounds) cancel into "no change"."""

from __future__ import annotations

from pipeline.experiments.judgements import Judgement
from pipeline.tools.diff.as_json import as_json
from pipeline.tools.diff.page import render_page
from pipeline.tools.diff.runs import Run
from pipeline.tools.diff.summary import summarise
from pipeline.tools.diff.text import render


def _run(name: str, judged: dict[tuple[str, int], tuple[float, str | None]]) -> Run:
    """(item, iteration) -> (score, the judged input's id)."""
    made = [
        Judgement("paper", item, it, "accuracy", score, score > 3, upstream=upstream, threshold=3)
        for (item, it), (score, upstream) in judged.items()
    ]
    return Run(name, {j.pair_key: j for j in made}, {})


ITEMS = [str(i) for i in range(6)]
# Round 0: the same text judged one point higher by B's judge. Rounds 1 and 2: B's revisions (other
# texts) scored one point lower.
A = _run("A", {(i, it): (3.0, f"a{i}{it}") for i in ITEMS for it in range(3)})
B = _run(
    "B",
    {
        (i, it): (4.0 if it == 0 else 2.0, f"a{i}0" if it == 0 else f"b{i}{it}")
        for i in ITEMS
        for it in range(3)
    },
)


def test_round_0_and_the_later_rounds_are_reported_apart_not_pooled() -> None:
    (metric,), changes = summarise(A, B, resamples=200)
    assert metric.paired == metric.changed == len(changes) == 18
    first, later = metric.rounds
    assert (first.name, first.first, first.last, first.paired) == ("0", 0, 0, 6)
    assert (later.name, later.first, later.last, later.paired) == ("1+", 1, 2, 12)
    assert first.inputs == {"same": 6} and later.inputs == {"changed": 12}
    # Pooled, +1 and -1 twice made a mean of -1/3 over items; apart, each round says its own.
    assert first.mean is not None and first.mean.estimate == 1.0
    assert later.mean is not None and later.mean.estimate == -1.0
    assert first.score_test is not None and first.score_test.n == 6 and first.score_test.p_value == 2 / 64
    assert later.score_test is not None and later.score_test.n == 6  # each item's two rounds as one
    assert first.pass_test is not None and first.pass_test.statistic == 0  # fail→pass in 6 items
    assert later.pass_test is None  # 3 → 2: failed in both runs
    # Holm's family: every round's tests (2 signed-rank, 1 McNemar; no repeat noise measured).
    assert [p.noise for p in metric.rounds] == [None, None]
    assert first.score_holm == later.score_holm == first.pass_holm == 3 * 2 / 64


def test_the_text_says_which_round_is_which_and_whether_its_input_changed() -> None:
    rows, changes = summarise(A, B, resamples=200)
    shown = render(["A", "B"], rows, changes)
    out = shown.splitlines()
    assert "  round 0, before any revision: 6 paired, 6 changed; same input: no change is the input's" in out
    assert "  later rounds (it1-2, both revised): 12 paired, 12 changed; input changed in all 12" in out
    assert "    mean B−A +1.000, 96.9% CI [+1.000, +1.000] (exact if symmetric; 6 items)" in shown
    assert "    mean B−A -1.000, 96.9% CI [-1.000, -1.000] (exact if symmetric; 6 items)" in shown
    assert all(len(line) <= 100 for line in shown.splitlines())


def test_a_round_0_whose_input_changed_says_so() -> None:
    # The assess stage changed: round 0 judged other texts in B (or one run's results name none).
    a = _run("A", {(i, 0): (3.0, f"a{i}") for i in ITEMS})
    b = _run("B", {(i, 0): (4.0, f"b{i}" if i != "0" else None) for i in ITEMS})
    rows, changes = summarise(a, b, resamples=200)
    (part,) = rows[0].rounds
    assert part.inputs == {"changed": 5, "unknown": 1}
    assert "input changed in 5, the same in 0, unknown in 1" in render(["A", "B"], rows, changes)
    assert "only the judge changed" not in render(["A", "B"], rows, changes)


def test_a_round_where_nothing_changed_is_one_line() -> None:
    b = _run(
        "B",
        {
            (i, it): (3.0 if it == 0 else 2.0, f"a{i}0" if it == 0 else f"b{i}{it}")
            for i in ITEMS
            for it in range(3)
        },
    )
    rows, changes = summarise(A, b, resamples=200)
    shown = render(["A", "B"], rows, changes).splitlines()
    at = shown.index(
        "  round 0, before any revision: 6 paired, 0 changed; same input: no change is the input's"
    )
    assert shown[at + 1].startswith("  later rounds (it1-2, both revised)")
    assert rows[0].rounds[0].score_test is None and rows[0].rounds[0].score_holm is None


def test_the_json_and_the_page_give_each_round_its_own_statistics() -> None:
    rows, changes = summarise(A, B, resamples=200)
    (metric,) = as_json(["A", "B"], rows, changes)["metrics"]
    first, later = metric["rounds"]
    assert (first["round"], first["iterations"], first["input"]) == (
        "0",
        [0, 0],
        {"same": 6, "changed": 0, "unknown": 0, "fixed": 0},
    )
    assert (later["round"], later["iterations"], later["input"]) == (
        "1+",
        [1, 2],
        {"same": 0, "changed": 12, "unknown": 0, "fixed": 0},
    )
    assert first["mean_difference"]["estimate"] == 1.0 and later["mean_difference"]["estimate"] == -1.0
    assert first["mean_difference"]["method"] == "exact" and first["repeat_noise"]["measured"] is False
    page = render_page(["A", "B"], rows, changes, ({}, {}))
    assert "round 0, before any revision: 6 paired" in page
    assert "later rounds (it1-2, both revised)" in page
    assert "repeat noise: unknown" in page and "96.9% CI" in page
