"""The HTML report's charts: inline SVG for the Figure 2 bar chart and the per-metric sparklines.

Drawn by hand rather than with a plotting library so the report stays one self-contained file with
no new dependency, and so the same numbers always give the same bytes (coordinates are rounded to
one decimal place and nothing depends on fonts being measured). The charts carry classes, not
colours: the page's stylesheet (pipeline/reports/templates/report.css) decides those, one place for the
chart and the tables beside it. The report marks this SVG safe, so every label is escaped here, by
`svg_text`: on one line, every control, bidi and invisible character shown as its escape, as the
pages and the terminal show them (pipeline.llm.terminal; a C0 control is not even valid XML, and a
standalone SVG is an XML file).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from html import escape
from typing import Any

from pipeline.llm.terminal import shown

SCALE_MIN, SCALE_MAX = 1, 5
PHASES = ("before", "after")

# Chart geometry, in SVG user units (the SVG scales to the page width). The margins left and right
# of the plot grow with the longest metric name and value label, so no label leaves the drawing.
_PLOT, _MIN_LEFT, _MIN_RIGHT, _FONT = 420.0, 118.0, 210.0, 12.0
_TOP, _BAR, _BAR_GAP, _GROUP_GAP = 46.0, 16.0, 3.0, 16.0
_LEGEND_WIDTH = 400.0  # the legend's three entries, from the plot's left edge

# Advance widths in em, rounded up from common sans-serif fonts (bold included): nothing is measured,
# so the same labels give the same bytes, and a wide guess only leaves a margin, never an overflow.
_NARROW, _WIDE = set("fijlrt.,:;!|'()[]{} "), set("mwMW@%&")


def _n(value: float) -> str:
    # One decimal and no "-0.0": stable bytes whatever the float noise in the inputs.
    text = f"{value:.1f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def svg_text(text: str) -> str:
    """`text` as an SVG label or title: one line, escapes for what would act or hide, XML-escaped."""
    return escape(shown(text, one_line=True))


def text_width(text: str, size: float = _FONT) -> float:
    """An upper bound on how wide `text` is drawn at `size` (as svg_text shows it), in the same units."""
    em = 0.0
    for char in shown(text, one_line=True):
        if char in _NARROW:
            em += 0.4
        elif char in _WIDE or ord(char) > 0x2E7F:  # wide letters; CJK and other full-width scripts
            em += 1.05
        elif char.isupper() or char.isdigit():
            em += 0.72
        else:
            em += 0.62
    return em * size


class _Axis:
    def __init__(self, left: float) -> None:
        self.left = left

    def x(self, score: float) -> float:
        clamped = min(max(score, SCALE_MIN), SCALE_MAX)
        return self.left + (clamped - SCALE_MIN) / (SCALE_MAX - SCALE_MIN) * _PLOT


def _value_label(stats: Mapping[str, Any]) -> str:
    if stats["mean"] is None:
        return f"no scores (unscored {stats['unscored']})"
    sd = "" if stats["sd"] is None else f" ± {stats['sd']:.2f}"
    extra = f", {stats['unscored']} unscored" if stats["unscored"] else ""
    return f"{stats['mean']:.2f}{sd} (n={stats['n']}{extra})"


def figure2_svg(
    figure2: Mapping[str, Mapping[str, Mapping[str, Any]]],
    paper: Mapping[str, tuple[tuple[float, float], tuple[float, float]]],
) -> str:
    """Grouped horizontal bars (before, after) per metric on the 1-5 axis, SD whiskers, paper means."""
    labels = [_value_label(phases[phase]) for phases in figure2.values() for phase in PHASES]
    left = max([_MIN_LEFT, *(text_width(m) + 20 for m in figure2)])
    # Value labels start 14 units right of the plot; 8 more keep them off the edge.
    right = max([_MIN_RIGHT, _LEGEND_WIDTH - _PLOT, *(text_width(label) + 22 for label in labels)])
    axis = _Axis(left)
    group = 2 * _BAR + _BAR_GAP
    height = _TOP + len(figure2) * (group + _GROUP_GAP) + 28
    width = left + _PLOT + right
    bottom = height - 34
    out = [
        # The font the widths were estimated for, set here so the drawing does not depend on the page.
        f'<svg class="chart" viewBox="0 0 {_n(width)} {_n(height)}" font-size="{_n(_FONT)}" '
        'font-family="system-ui, sans-serif" role="img" aria-labelledby="fig2-title" '
        'xmlns="http://www.w3.org/2000/svg">',
        '<title id="fig2-title">Judge scores before and after the feedback loop, mean ± SD</title>',
        '<g class="legend">'
        f'<rect class="before" x="{_n(left)}" y="8" width="12" height="12"/>'
        f'<text x="{_n(left + 17)}" y="18">before (iteration 0)</text>'
        f'<rect class="after" x="{_n(left + 150)}" y="8" width="12" height="12"/>'
        f'<text x="{_n(left + 167)}" y="18">after (kept iteration)</text>'
        f'<path class="paper" d="M{_n(left + 311)} 8 l5 6 l-5 6 l-5 -6 z"/>'
        f'<text x="{_n(left + 321)}" y="18">paper mean</text></g>',
    ]
    for tick in range(SCALE_MIN, SCALE_MAX + 1):
        x = _n(axis.x(tick))
        out.append(f'<line class="grid" x1="{x}" y1="{_n(_TOP - 8)}" x2="{x}" y2="{_n(bottom)}"/>')
        out.append(f'<text class="tick" x="{x}" y="{_n(bottom + 16)}" text-anchor="middle">{tick}</text>')
    for index, (metric, phases) in enumerate(figure2.items()):
        top = _TOP + index * (group + _GROUP_GAP)
        out.append(
            f'<text class="metric" x="{_n(left - 10)}" y="{_n(top + group / 2 + 4)}" '
            f'text-anchor="end">{svg_text(metric)}</text>'
        )
        for row, phase in enumerate(PHASES):
            stats = phases[phase]
            y = top + row * (_BAR + _BAR_GAP)
            mid = _n(y + _BAR / 2)
            if stats["mean"] is not None:
                end = axis.x(stats["mean"])
                out.append(
                    f'<rect class="{phase}" x="{_n(left)}" y="{_n(y)}" width="{_n(end - left)}" '
                    f'height="{_n(_BAR)}"><title>{svg_text(f"{metric} {phase}: {_value_label(stats)}")}'
                    "</title></rect>"
                )
                if stats["sd"]:
                    lo, hi = axis.x(stats["mean"] - stats["sd"]), axis.x(stats["mean"] + stats["sd"])
                    out.append(
                        f'<path class="whisker" d="M{_n(lo)} {mid} H{_n(hi)} M{_n(lo)} {_n(y + 4)} '
                        f'V{_n(y + _BAR - 4)} M{_n(hi)} {_n(y + 4)} V{_n(y + _BAR - 4)}"/>'
                    )
            if metric in paper:
                px = axis.x(paper[metric][row][0])
                out.append(f'<path class="paper" d="M{_n(px)} {_n(y + 1)} l5 7 l-5 7 l-5 -7 z"/>')
            # A fixed column right of the axis: labels beside the bars collide with whiskers and markers.
            label = svg_text(_value_label(stats))
            out.append(
                f'<text class="value" x="{_n(axis.x(SCALE_MAX) + 14)}" y="{_n(y + 12)}">{label}</text>'
            )
    out.append(
        f'<text class="axis" x="{_n(left + _PLOT / 2)}" y="{_n(height - 6)}" text-anchor="middle">'
        "judge score (1–5); bars start at 1</text></svg>"
    )
    return "\n".join(out)


_SPARK_WIDTH, _SPARK_HEIGHT, _SPARK_PAD = 96.0, 30.0, 4.0
# A sparkline's frame, the same in every one (its title between the two parts).
_SPARK_OPEN = (
    f'<svg class="spark" viewBox="0 0 {_n(_SPARK_WIDTH)} {_n(_SPARK_HEIGHT)}" width="{_n(_SPARK_WIDTH)}" '
    f'height="{_n(_SPARK_HEIGHT)}" role="img" xmlns="http://www.w3.org/2000/svg">'
)
_SPARK_GRID = (
    f'<line class="grid" x1="0" y1="{_n(_SPARK_PAD)}" x2="{_n(_SPARK_WIDTH)}" y2="{_n(_SPARK_PAD)}"/>'
    f'<line class="grid" x1="0" y1="{_n(_SPARK_HEIGHT - _SPARK_PAD)}" x2="{_n(_SPARK_WIDTH)}" '
    f'y2="{_n(_SPARK_HEIGHT - _SPARK_PAD)}"/>'
)


def sparkline_svg(scores: Sequence[int | None], kept: int, label: str) -> str:
    """Scores over iterations on a fixed 1-5 scale; a gap where a score is missing; kept ringed.
    Drawn once a process for each (scores, kept, label): items' short runs of scores repeat."""
    return _sparkline(tuple(scores), kept, label)


@lru_cache(maxsize=4096)
def _sparkline(scores: tuple[int | None, ...], kept: int, label: str) -> str:
    width, height, pad = _SPARK_WIDTH, _SPARK_HEIGHT, _SPARK_PAD
    step = (width - 2 * pad) / max(len(scores) - 1, 1)

    def point(i: int, s: int) -> tuple[str, str]:
        y = height - pad - (s - SCALE_MIN) / (SCALE_MAX - SCALE_MIN) * (height - 2 * pad)
        return _n(pad + i * step), _n(y)

    runs: list[list[tuple[str, str]]] = [[]]
    for i, s in enumerate(scores):
        if s is None:
            runs.append([])
        else:
            runs[-1].append(point(i, s))
    out = [_SPARK_OPEN, f"<title>{svg_text(label)}</title>", _SPARK_GRID]
    for run in runs:
        if len(run) > 1:
            out.append(f'<polyline points="{" ".join(f"{x},{y}" for x, y in run)}"/>')
    for i, s in enumerate(scores):
        # A dot where no line shows the score (alone between gaps), and a ring on the kept iteration.
        alone = (i == 0 or scores[i - 1] is None) and (i == len(scores) - 1 or scores[i + 1] is None)
        if s is not None and (alone or i == kept):
            x, y = point(i, s)
            ring = ' class="kept" r="3.2"' if i == kept else ' r="2"'
            out.append(f'<circle cx="{x}" cy="{y}"{ring}/>')
    out.append("</svg>")
    return "".join(out)
