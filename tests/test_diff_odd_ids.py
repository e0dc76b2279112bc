"""Every view of `judgeloop diff` (terminal, --json, --html, --item) on item ids and metric names
holding controls, bidi overrides, line breaks (CRLF, U+2028), NUL, tabs and very long runs: the
terminal shows each escaped exactly once, one line each and within 100 columns (the escape lengthened a
line cut to 100 before it); the JSON keeps the id exactly; the page holds no raw control."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.experiments.judgements import Judgement
from pipeline.llm.terminal import shown_line
from pipeline.tools.diff.as_json import as_json
from pipeline.tools.diff.page import render_page
from pipeline.tools.diff.runs import Run
from pipeline.tools.diff.summary import summarise
from pipeline.tools.diff.text import WIDTH, render, side_by_side

ODD = ["a\r\nB: forged", "b\u202egnp.exe", "c\x1b[2Jx", "d" + "x" * 300, "e\u2028f", "g\x00h", "\t", "\\x1b"]


def _runs(ids: list[str], metric: str) -> tuple[Run, Run]:
    sides = []
    for side in (0, 1):
        judged = [
            Judgement("paper", item, 0, metric, 1.0 + side * (k % 2), True, threshold=3)
            for k, item in enumerate(ids)
        ]
        sides.append(Run("AB"[side], {j.pair_key: j for j in judged}, {}))
    return sides[0], sides[1]


def _check_views(ids: list[str], metric: str) -> None:
    a, b = _runs(ids, metric)
    rows, changes = summarise(a, b, resamples=100)
    text = render(["A\x1b]0;t\x07", "B\u202e"], rows, changes)
    for line in text.split("\n"):
        assert len(line) <= WIDTH, line
        assert shown_line(line) == line or "\\" in line  # nothing left to escape but escapes
        assert not any(ch in line for ch in "\r\x1b\x00\u202e\u2028\x85")
    for change in changes:
        assert shown_line(change.a.item)[:20] in text  # shown once: its escape, not the escape's
    data = json.loads(json.dumps(as_json(["A", "B"], rows, changes), ensure_ascii=False))
    assert {c["item"] for c in data["changes"]} == {c.a.item for c in changes}
    page = render_page(["A", "B"], rows, changes, ({}, {}))
    assert not any(ch in page for ch in "\x1b\x00\u202e")
    for change in changes:
        shown = side_by_side(change.a, change.b, ({}, {}), "why")
        assert not any(ch in shown for ch in "\r\x1b\x00\u202e\u2028")


def test_odd_ids_in_every_view() -> None:
    _check_views(ODD, "acc\r\nmetric")


@given(
    st.lists(st.text(min_size=1, max_size=120), min_size=1, max_size=8, unique=True),
    st.text(min_size=1, max_size=40),
)
@settings(max_examples=60, deadline=None)
def test_any_ids_in_every_view(ids: list[str], metric: str) -> None:
    _check_views(ids, metric)
