"""The HTML report's look: inline SVG (the Figure 2 bar chart, per-metric sparklines) and the
stylesheet that colours both the charts and the page.

Drawn by hand rather than with a plotting library so the report stays one self-contained file with
no new dependency, and so the same numbers always give the same bytes (coordinates are rounded to
one decimal place and nothing depends on fonts being measured). The charts carry classes, not
colours: the stylesheet below decides those, one place for the chart and the tables beside it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

SCALE_MIN, SCALE_MAX = 1, 5
PHASES = ("before", "after")

# Calm, light, print-friendly; a monospace <pre> for every prompt and reply, wrapped, never cut.
STYLE = """
:root{color-scheme:light;--fg:#1f2328;--muted:#5d6670;--line:#d9dde2;--bg:#fbfbfa;--card:#fff;--before:#a9b8cc;
--after:#2f6f8f;--paper:#9a6400;--low:#fbe9e7;--unscored:#fff3d1;--mono:ui-monospace,Menlo,Consolas,monospace}
*{box-sizing:border-box}main{max-width:1080px;margin:0 auto;padding:24px 28px 64px}
body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.5 system-ui,"Segoe UI",sans-serif}
h1{font-size:1.6rem;margin:0 0 4px}h3{font-size:1.1rem;margin:0 0 6px}h4{font-size:.95rem;margin:16px 0 6px}
h2{font-size:1.25rem;margin:36px 0 10px;border-bottom:1px solid var(--line)}
a{color:#1d5f86}td.num a{text-decoration:none}.muted,.note{color:var(--muted)}.note{font-size:.88rem}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:12px 0}
dl.facts dt{color:var(--muted)}dl.facts dd{margin:0;min-width:0;overflow-wrap:anywhere}
nav table{font-size:.9rem}
table{border-collapse:collapse;margin:8px 0;font-variant-numeric:tabular-nums;background:var(--card)}
th,td{border:1px solid var(--line);padding:4px 9px;text-align:left;vertical-align:top}
th{background:#f1f3f5;font-weight:600}td.num{text-align:right}td.low{background:var(--low)}
td.unscored{background:var(--unscored)}td.carried{color:var(--muted);font-style:italic}
tr.kept td,tr.kept th{font-weight:600}tr.kept th::after{content:" (kept)";font-weight:400;color:var(--after)}
svg.chart{width:100%;max-width:860px;height:auto;font-size:12px}svg .metric{font-weight:600}
svg text{fill:var(--fg)}svg .tick,svg .axis{fill:var(--muted)}svg .grid{stroke:#e3e6ea}
svg rect.before{fill:var(--before)}svg rect.after{fill:var(--after)}svg .whisker{stroke:#333;fill:none}
svg .paper{fill:#fff;stroke:var(--paper);stroke-width:1.5}svg.spark circle{fill:var(--after)}
svg.spark polyline{fill:none;stroke:var(--after);stroke-width:1.5}
svg.spark circle.kept{fill:#fff;stroke:var(--after);stroke-width:1.5}
section.item{background:var(--card);border:1px solid var(--line);border-radius:6px;padding:16px 18px;
margin:18px 0}details{margin:6px 0}summary{cursor:pointer}
details.iteration{border:1px solid var(--line);border-radius:5px;padding:4px 12px}
details.iteration>summary{font-weight:600;padding:4px 0}details.iteration[open]{background:#fcfcfd}
.chips{font-weight:400;margin-left:10px}.chip,.badge{display:inline-block;font-size:.82rem;padding:0 7px;
margin-right:4px;border-radius:10px;background:#eef1f4;color:#33414f}
.chip.low,.badge.bad{background:var(--low);color:#8e1b12}.badge.ok{background:#e2f2e6;color:#1d5e2c}
.call{border-left:3px solid var(--line);padding:2px 0 2px 12px;margin:10px 0}code{font:12px var(--mono)}
.call.missing{border-left-color:#c62828}.missing-text{color:#b71c1c;font-weight:600}
.metric{margin:12px 0;padding-top:8px;border-top:1px dashed var(--line)}
.role{display:inline-block;font:600 .75rem/1.6 var(--mono);text-transform:uppercase;padding:0 6px;
border-radius:3px;background:#eef1f4;color:#33414f;margin-right:6px}
.role.assistant,.role.reply{background:#e3f0f6;color:#174a63}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f6f7f8;border:1px solid #e5e7ea;border-radius:4px;
padding:8px 10px;margin:4px 0 8px;font:12.5px/1.45 var(--mono)}
pre.reply{background:#f2f8fb;border-color:#d5e6ef}pre.feedback{background:#fffaf0;border-color:#eadfc8}
.tools button{font:inherit;font-size:.85rem;margin-right:6px}html:not(.js) .tools{display:none}
@media print{body{background:#fff;font-size:11pt}main{max-width:none;padding:0}.tools{display:none}
section.item,table,svg,.call{break-inside:avoid-page}a{color:inherit}}
"""

# Chart geometry, in SVG user units (the SVG scales to the page width).
_LEFT, _PLOT, _RIGHT = 118.0, 420.0, 210.0
_TOP, _BAR, _BAR_GAP, _GROUP_GAP = 46.0, 16.0, 3.0, 16.0


def _n(value: float) -> str:
    # One decimal and no "-0.0": stable bytes whatever the float noise in the inputs.
    text = f"{value:.1f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _x(score: float) -> float:
    clamped = min(max(score, SCALE_MIN), SCALE_MAX)
    return _LEFT + (clamped - SCALE_MIN) / (SCALE_MAX - SCALE_MIN) * _PLOT


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
    group = 2 * _BAR + _BAR_GAP
    height = _TOP + len(figure2) * (group + _GROUP_GAP) + 24
    width = _LEFT + _PLOT + _RIGHT
    bottom = height - 30
    out = [
        f'<svg class="chart" viewBox="0 0 {_n(width)} {_n(height)}" role="img" '
        'aria-labelledby="fig2-title" xmlns="http://www.w3.org/2000/svg">',
        '<title id="fig2-title">Judge scores before and after the feedback loop, mean ± SD</title>',
        '<g class="legend">'
        f'<rect class="before" x="{_n(_LEFT)}" y="8" width="12" height="12"/>'
        f'<text x="{_n(_LEFT + 17)}" y="18">before (iteration 0)</text>'
        f'<rect class="after" x="{_n(_LEFT + 150)}" y="8" width="12" height="12"/>'
        f'<text x="{_n(_LEFT + 167)}" y="18">after (kept iteration)</text>'
        f'<path class="paper" d="M{_n(_LEFT + 311)} 8 l5 6 l-5 6 l-5 -6 z"/>'
        f'<text x="{_n(_LEFT + 321)}" y="18">paper mean</text></g>',
    ]
    for tick in range(SCALE_MIN, SCALE_MAX + 1):
        x = _n(_x(tick))
        out.append(f'<line class="grid" x1="{x}" y1="{_n(_TOP - 8)}" x2="{x}" y2="{_n(bottom)}"/>')
        out.append(f'<text class="tick" x="{x}" y="{_n(bottom + 16)}" text-anchor="middle">{tick}</text>')
    for index, (metric, phases) in enumerate(figure2.items()):
        top = _TOP + index * (group + _GROUP_GAP)
        out.append(
            f'<text class="metric" x="{_n(_LEFT - 10)}" y="{_n(top + group / 2 + 4)}" '
            f'text-anchor="end">{escape(metric)}</text>'
        )
        for row, phase in enumerate(PHASES):
            stats = phases[phase]
            y = top + row * (_BAR + _BAR_GAP)
            mid = _n(y + _BAR / 2)
            if stats["mean"] is not None:
                end = _x(stats["mean"])
                out.append(
                    f'<rect class="{phase}" x="{_n(_LEFT)}" y="{_n(y)}" width="{_n(end - _LEFT)}" '
                    f'height="{_n(_BAR)}"><title>{escape(f"{metric} {phase}: {_value_label(stats)}")}'
                    "</title></rect>"
                )
                if stats["sd"]:
                    lo, hi = _x(stats["mean"] - stats["sd"]), _x(stats["mean"] + stats["sd"])
                    out.append(
                        f'<path class="whisker" d="M{_n(lo)} {mid} H{_n(hi)} M{_n(lo)} {_n(y + 4)} '
                        f'V{_n(y + _BAR - 4)} M{_n(hi)} {_n(y + 4)} V{_n(y + _BAR - 4)}"/>'
                    )
            if metric in paper:
                px = _x(paper[metric][row][0])
                out.append(f'<path class="paper" d="M{_n(px)} {_n(y + 1)} l5 7 l-5 7 l-5 -7 z"/>')
            # A fixed column right of the axis: labels beside the bars collide with whiskers and markers.
            label = escape(_value_label(stats))
            out.append(f'<text class="value" x="{_n(_x(SCALE_MAX) + 14)}" y="{_n(y + 12)}">{label}</text>')
    out.append(
        f'<text class="axis" x="{_n(_LEFT + _PLOT / 2)}" y="{_n(height - 2)}" text-anchor="middle">'
        "judge score (1–5); bars start at 1</text></svg>"
    )
    return "\n".join(out)


def sparkline_svg(scores: Sequence[int | None], kept: int, label: str) -> str:
    """Scores over iterations on a fixed 1-5 scale; a gap where a score is missing; kept ringed."""
    width, height, pad = 96.0, 30.0, 4.0
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
    out = [
        f'<svg class="spark" viewBox="0 0 {_n(width)} {_n(height)}" width="{_n(width)}" '
        f'height="{_n(height)}" role="img" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(label)}</title>",
        f'<line class="grid" x1="0" y1="{_n(pad)}" x2="{_n(width)}" y2="{_n(pad)}"/>',
        f'<line class="grid" x1="0" y1="{_n(height - pad)}" x2="{_n(width)}" y2="{_n(height - pad)}"/>',
    ]
    for run in runs:
        if len(run) > 1:
            out.append(f'<polyline points="{" ".join(f"{x},{y}" for x, y in run)}"/>')
    for i, s in enumerate(scores):
        if s is not None:
            x, y = point(i, s)
            ring = ' class="kept" r="3.2"' if i == kept else ' r="2"'
            out.append(f'<circle cx="{x}" cy="{y}"{ring}/>')
    out.append("</svg>")
    return "".join(out)
