"""Figure 2's chart keeps every label inside its drawing, whatever the values and label lengths, by
the same width estimate the layout uses (tests/test_report_browser.py checks it in Chromium)."""

from __future__ import annotations

import re
from html import escape
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.experiments.paper.aggregation import PAPER_FIGURE2
from pipeline.llm.terminal import shown
from pipeline.reports.svg import _n, figure2_svg, sparkline_svg, text_width

WORST = {"mean": 1.0, "sd": 2.1234, "n": 123456789, "unscored": 987654321}
NONE = {"mean": None, "sd": None, "n": 0, "unscored": 123456789012}
FIGURES: list[dict[str, dict[str, dict[str, Any]]]] = [
    {"coherence": {"before": {"mean": 5.0, "sd": 0.0, "n": 142, "unscored": 0}, "after": WORST}},
    {
        "Completeness, as the WWW judges MMMM it (a very long metric name indeed)": {
            "before": NONE,
            "after": WORST,
        }
    },
    {"評価の一貫性": {"before": WORST, "after": NONE}, "a": {"before": NONE, "after": NONE}},
    {
        "accuracy": {
            "before": {"mean": -3.0, "sd": 9.0, "n": 2, "unscored": 1},
            "after": {"mean": 99.0, "sd": None, "n": 1, "unscored": 0},
        }
    },
]


def extents(svg: str) -> list[tuple[str, float, float]]:
    """(label, left, right) of every text element, by the layout's own width estimate."""
    out = []
    for attrs, label in re.findall(r"<text([^>]*)>([^<]*)</text>", svg):
        x = float(re.search(r'\bx="([^"]+)"', attrs).group(1))  # type: ignore[union-attr]
        width = text_width(label.replace("&amp;", "&"))
        anchor = re.search(r'text-anchor="(\w+)"', attrs)
        shift = {"end": width, "middle": width / 2}.get(anchor.group(1) if anchor else "start", 0.0)
        out.append((label, x - shift, x - shift + width))
    return out


@pytest.mark.parametrize("figure2", FIGURES)
def test_every_label_fits_inside_the_view_box(figure2: dict[str, dict[str, dict[str, Any]]]) -> None:
    svg = figure2_svg(figure2, PAPER_FIGURE2)
    view = re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', svg)
    assert view is not None
    width = float(view.group(1))
    for label, left, right in extents(svg):
        assert left >= 0 and right <= width, f"{label!r} spans {left:.0f}..{right:.0f} of 0..{width:.0f}"
    # Bars and markers stay on the axis whatever the value: nothing is drawn left of 0 or past the edge.
    for x in re.findall(r'(?:\bx="|M)(-?[\d.]+)', svg):
        assert 0 <= float(x) <= width


def test_a_longer_label_widens_the_drawing_rather_than_leaving_it() -> None:
    short = figure2_svg(FIGURES[0], PAPER_FIGURE2)
    long = figure2_svg(FIGURES[1], PAPER_FIGURE2)
    size = re.compile(r'viewBox="0 0 ([\d.]+)')
    assert float(size.search(long).group(1)) > float(size.search(short).group(1))  # type: ignore[union-attr]


def reference_sparkline(scores: list[int | None], kept: int, label: str) -> str:
    """sparkline_svg as it was before each drawing was kept for the process (issue 31), its title
    shown as every label is since (a control as its escape: pipeline.reports.svg.svg_text)."""
    width, height, pad = 96.0, 30.0, 4.0
    step = (width - 2 * pad) / max(len(scores) - 1, 1)

    def point(i: int, s: int) -> tuple[str, str]:
        y = height - pad - (s - 1) / 4 * (height - 2 * pad)
        return _n(pad + i * step), _n(y)

    runs: list[list[tuple[str, str]]] = [[]]
    for i, s in enumerate(scores):
        if s is None:
            runs.append([])
        else:
            runs[-1].append(point(i, s))
    out = [
        f'<svg class="spark" viewBox="0 0 {_n(width)} {_n(height)}" width="{_n(width)}" '
        f'height="{_n(height)}" role="img" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(shown(label, one_line=True))}</title>",
        f'<line class="grid" x1="0" y1="{_n(pad)}" x2="{_n(width)}" y2="{_n(pad)}"/>',
        f'<line class="grid" x1="0" y1="{_n(height - pad)}" x2="{_n(width)}" y2="{_n(height - pad)}"/>',
    ]
    for run in runs:
        if len(run) > 1:
            out.append(f'<polyline points="{" ".join(f"{x},{y}" for x, y in run)}"/>')
    for i, s in enumerate(scores):
        alone = (i == 0 or scores[i - 1] is None) and (i == len(scores) - 1 or scores[i + 1] is None)
        if s is not None and (alone or i == kept):
            x, y = point(i, s)
            ring = ' class="kept" r="3.2"' if i == kept else ' r="2"'
            out.append(f'<circle cx="{x}" cy="{y}"{ring}/>')
    out.append("</svg>")
    return "".join(out)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.none() | st.integers(1, 5), max_size=6),
    st.integers(0, 6),
    st.text(max_size=20),
)
def test_a_sparkline_is_drawn_as_before(scores: list[int | None], kept: int, label: str) -> None:
    assert sparkline_svg(scores, kept, label) == reference_sparkline(scores, kept, label)
    assert sparkline_svg(tuple(scores), kept, label) == reference_sparkline(scores, kept, label)


def test_the_same_sparkline_is_drawn_once_a_process() -> None:
    # Items' short runs of scores repeat (hundreds of sparklines at 133 items, few distinct ones).
    first = sparkline_svg([3, None, 4], 2, "coherence")
    assert sparkline_svg([3, None, 4], 2, "coherence") is first
    assert sparkline_svg([3, None, 4], 0, "coherence") is not first
