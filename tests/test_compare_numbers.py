"""`judgeloop compare`'s table against odd numbers and odd names (compare-review): a change is shown
only where the table can show it, never "+0"; a number never shown as 0 that is not; NaN equal to
itself; huge numbers kept in their column; a metric's name from a metrics file never breaks a line
or the 100 columns; a design's headline that gives a non-number is named, never a traceback."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from wcwidth import wcswidth

from pipeline.experiments.design import Design, Headline
from pipeline.experiments.registry import designs
from pipeline.llm.settings import EngineSettings
from pipeline.llm.terminal import guarded
from pipeline.tools.compare import design_table, render
from tests.conftest import ROOT

PATH = "outputs/paper/metrics.json"
GOOD = json.loads((ROOT / PATH).read_text(encoding="utf-8"))
PAPER = next(d for d in designs() if d.name == "paper")


def _with(**numbers: Any) -> dict[str, Any]:
    """The committed paper metrics with figure2's accuracy means and top-level numbers replaced."""
    metrics = json.loads(json.dumps(GOOD))
    for key, value in numbers.items():
        if key in ("before", "after"):
            metrics["figure2"]["accuracy"][key]["mean"] = value
        else:
            metrics[key] = value
    return {PATH: metrics}


def _table(a: dict[str, Any], b: dict[str, Any], show_all: bool = False) -> list[str]:
    return design_table(PAPER, PATH, [a, b], ["A", "B"], show_all)


def _row(lines: list[str], label: str) -> str | None:
    return next((line for line in lines if line.startswith(f"  {label} ")), None)


def test_nan_against_nan_is_no_change() -> None:
    lines = _table(_with(before=math.nan), _with(before=math.nan))
    assert _row(lines, "accuracy before (mean 1-5)") is None  # unchanged: hidden
    row = _row(_table(_with(before=math.nan), _with(before=math.nan), True), "accuracy before (mean 1-5)")
    assert row is not None and row.split()[-3:] == ["nan", "nan", "="]
    moved = _row(_table(_with(before=1.0), _with(before=math.nan)), "accuracy before (mean 1-5)")
    assert moved is not None and moved.split()[-2:] == ["1", "nan"]  # no change computed of a NaN


def test_a_small_number_is_never_shown_as_zero_nor_its_change_hidden() -> None:
    row = _row(_table(_with(after=1e-5), _with(after=4e-5)), "accuracy after (mean 1-5)")
    assert row is not None, "a fourfold change hidden as '='"
    assert row.split()[-3:] == ["0.00001", "0.00004", "+0.00003"]
    both = _row(_table(_with(after=5.0), _with(after=1e-7), True), "accuracy after (mean 1-5)")
    assert both is not None and both.split()[-2] != "0"


def test_float_noise_is_no_change() -> None:
    lines = _table(_with(after=4.666666666666667), _with(after=4.666666666666666))
    assert _row(lines, "accuracy after (mean 1-5)") is None


def test_huge_numbers_keep_their_columns() -> None:
    for value in (10**20, 10**400, -(10**25), 1e300, -1.2345678901234e15, math.inf):
        lines = _table(_with(items=3), _with(items=value))
        row = _row(lines, "items")
        assert row is not None and len(row) <= 100, row
        assert len(row.split()) == 4, row  # the label's word, then two values and a change, apart
        assert row.split()[0] == "items" and row.split()[1] == "3", row


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(st.floats(allow_nan=True), st.integers(-(10**30), 10**30)),
    st.one_of(st.floats(allow_nan=True), st.integers(-(10**30), 10**30)),
)
def test_any_two_numbers(a: float | int, b: float | int) -> None:
    """Every row fits its columns; a change shown is never a rounded zero; '=' only for values the
    table shows alike."""
    lines = _table(_with(after=a), _with(after=b), True)
    row = _row(lines, "accuracy after (mean 1-5)")
    assert row is not None and len(row) <= 100, row
    cells = row[len("  accuracy after (mean 1-5)") :].split()
    assert len(cells) in (2, 3), row
    if len(cells) == 3:
        change = cells[2]
        assert change == "=" or re.search(r"[1-9]|inf", change), row
        if change == "=":
            assert cells[0] == cells[1], row


def test_a_metric_name_with_a_line_break_or_escape_stays_in_its_line() -> None:
    odd = "x\n  accuracy after (mean 1-5)   1   5   +4\x1b[2J\u202e" + "y" * 80
    a = _with()
    a[PATH]["figure2"][odd] = {"before": {"mean": 1.0}, "after": {"mean": 2.0}}
    b = json.loads(json.dumps(a))
    b[PATH]["figure2"][odd]["after"]["mean"] = 3.0
    lines = [guarded(line) for line in _table(a, b)]  # as echo prints them
    assert not any("\n" in line for line in lines)
    assert max(len(line) for line in lines) <= 100
    assert sum(line.startswith("  x") for line in lines) == 1  # the changed row, one line
    assert any("\\x1b[2J\\u202e" in line or line.endswith("…") for line in lines)


def test_run_names_are_escaped_and_cut() -> None:
    names = ["a\u202eb\x1b[2J" + "z" * 120, "c\nd"]
    out = render(names, [{}, {}], [{}, {}])
    lines = guarded(out).splitlines()
    assert max(len(line) for line in lines) <= 100
    assert lines[0].startswith("a\\u202eb\\x1b[2J") and "c\\nd" in lines[0]


def odd_headline(metrics: dict[str, Any]) -> Headline:
    """A registered design's headline that gives what is not a number (a plugin's bug)."""
    return [("text", "high"), ("flag", True), ("same", 1.0), ("same", 2.0)]  # type: ignore[list-item]


ODD = Design(
    name="odd",
    title="a plugin's design",
    params=EngineSettings,
    stages=(),
    headline=f"{__name__}:odd_headline",
)


def test_a_design_whose_headline_gives_no_number_is_named() -> None:
    lines = design_table(ODD, "m.json", [{"m.json": {}}, {"m.json": {}}], ["A", "B"], True)
    text = "\n".join(lines)
    assert "odd" in text and "'text'" in text and "not a number" in text, text
    assert "same" in text and "same (2)" in text  # two rows of one label: both shown


def _columns(line: str) -> int:
    """A line's width on a terminal, as the wcwidth library gives it (review23: a hand count by
    unicodedata gave unassigned U+103D6 two columns, Devanagari vowel signs one)."""
    return wcswidth(line)


def test_wide_characters_in_a_name_keep_the_100_columns() -> None:
    """A metric named in Chinese (a researcher's own dimension names): each character two columns wide."""
    wide = "连贯性" * 30
    a = _with()
    a[PATH]["figure2"][wide] = {"before": {"mean": 1.0}, "after": {"mean": 2.0}}
    b = json.loads(json.dumps(a))
    b[PATH]["figure2"][wide]["after"]["mean"] = 3.0
    lines = _table(a, b)
    row = next(line for line in lines if line.startswith("  连"))
    assert _columns(row) == 100 and row.endswith("2           3        +1"), row
    out = render(["分支" * 40, "HEAD"], [a, b], [{}, {}])
    assert max(_columns(line) for line in out.splitlines()) <= 100


def test_a_design_without_a_headline_says_so() -> None:
    """A registered design that names no headline numbers: its title alone read as 'nothing changed'."""
    bare = Design(name="bare", title="no headline", params=EngineSettings, stages=())
    lines = design_table(bare, "m.json", [{"m.json": {"x": 1}}, {"m.json": {"x": 2}}], ["A", "B"], False)
    assert lines == [
        "bare: no headline",
        "  (the design names no headline numbers: its Design.headline is None)",
    ]


def test_the_pointer_to_diff_names_the_one_design() -> None:
    out = render(["HEAD~1", "my branch"], [_with(after=1.0), _with(after=2.0)], [{}, {}], ["paper"])
    assert "\n  judgeloop diff HEAD~1 'my branch' --design paper\n" in out, out
    long = render(["e" * 60, "f" * 60], [_with(after=1.0), _with(after=2.0)], [{}, {}], ["paper"])
    assert long.endswith("\n  judgeloop diff A B, A and B the two runs above\n"), long  # never a command cut


@settings(max_examples=150, deadline=None)
@given(
    st.text(min_size=1, max_size=120).filter(lambda name: "." not in name), st.text(min_size=1, max_size=120)
)
def test_any_metric_and_run_name_keeps_one_line_of_100_columns(metric: str, run: str) -> None:
    """(A metric whose name holds a dot is not found: test_a_metric_whose_name_holds_a_dot_is_found.)"""
    a = _with()
    a[PATH]["figure2"][metric] = {"before": {"mean": 1.0}, "after": {"mean": 2.0}}
    b = json.loads(json.dumps(a))
    b[PATH]["figure2"][metric]["after"]["mean"] = 3.0
    out = guarded(render([run, "HEAD"], [a, b], [{}, {}], ["paper"]), isolates=True)  # as compare prints it
    lines = out.splitlines()
    assert lines[0].endswith(" → HEAD") and max(_columns(line) for line in lines) <= 100, out
    assert sum(line.rstrip().endswith("2           3        +1") for line in lines) == 1, out


def test_a_metric_whose_name_holds_a_dot_is_found() -> None:
    """`accuracy v1.2`: the headline looked its numbers up at `figure2.accuracy v1.2.after.mean`,
    split at every dot, found none, and showed a change as two missing numbers, hidden."""
    a = _with()
    a[PATH]["figure2"]["accuracy v1.2"] = {"before": {"mean": 1.0}, "after": {"mean": 2.0}}
    b = json.loads(json.dumps(a))
    b[PATH]["figure2"]["accuracy v1.2"]["after"]["mean"] = 3.0
    row = _row(_table(a, b), "accuracy v1.2 after (mean 1-5)")
    assert row is not None and row.split()[-3:] == ["2", "3", "+1"], row
    rag = next(d for d in designs() if d.name == "rag")
    path = "outputs/rag/metrics.json"
    metrics = {
        "dimensions": {"faith.v2": {"mean": 0.5}},
        "agreement": {"x.y": {"scores": {"overall": {"auroc": {"value": 0.75}}}}},
    }
    lines = design_table(rag, path, [{path: metrics}, {path: metrics}], ["A", "B"], True)
    assert any(line.split()[-3:] == ["0.5", "0.5", "="] for line in lines if "faith.v2" in line), lines
    assert any(line.split()[-3:] == ["0.75", "0.75", "="] for line in lines if "x.y" in line), lines
