"""The designs' DVC plots (their CSV files), drawn as inline SVG, so that they render offline.

`dvc plots show` writes a page that loads Vega from a CDN, which renders blank with no network. The
report index draws the same files here instead, from the plot's own description in dvc.yaml (its
template, x and y; pipeline.experiments.design.Plot):

    bar_horizontal  one bar a row: length x, labelled by y (whiskers where a column `sd` is)
    scatter         one point a row at (x, y)
    linear (other)  y against x, one line a value of the column `series` where there is one

Bars are coloured by a column `phase` where there is one (before, after). As in svg.py: nothing
is measured, coordinates are rounded, the same rows give the same bytes, every label is escaped
(svg_text: a control in a CSV's field is shown as its escape, so the SVG stays valid XML), and
colours come from the page's stylesheet (classes), or from `standalone` for a file of its own.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path

from pipeline.data.input_files import MAX_INPUT_BYTES
from pipeline.errors import InputError
from pipeline.llm.files import read_regular
from pipeline.reports.svg import svg_text, text_width

Row = Mapping[str, str]
_FONT, _PLOT_W, _PLOT_H, _BAR, _GAP = 12.0, 420.0, 220.0, 14.0, 4.0
_SERIES = 8  # colour classes s0..s7; more series share them


def _n(value: float) -> str:
    text = f"{value:.1f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


_LARGEST = 1e12


def _number(text: str | None) -> float | None:
    try:
        value = float(text) if text not in (None, "") else None
    except ValueError:
        return None
    # Past _LARGEST a value is no score, mean or count a plot draws, and the axis arithmetic on it
    # (a mean plus its sd, a tick's logarithm) would overflow: it is drawn as "no value".
    return value if value is not None and math.isfinite(value) and abs(value) <= _LARGEST else None


def _label(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".") if value != int(value) else str(int(value))


def read_rows(path: Path) -> list[dict[str, str]]:
    """A plot's CSV rows, each field as text (a short row's missing fields and a long row's extra
    ones left out); an InputError naming the file and line for one that is not UTF-8 CSV. The file
    is an output anyone can edit, drawn on every report."""
    rows: list[dict[str, str]] = []
    try:
        text = read_regular(path, MAX_INPUT_BYTES).decode("utf-8")  # never a pipe or /dev/zero
        with io.StringIO(text, newline="") as handle:
            reader = csv.DictReader(handle)
            for row in reader:
                rows.append({k: v for k, v in row.items() if isinstance(k, str) and isinstance(v, str)})
    except OSError as exc:  # a folder, a pipe or a device in its place; past the bound; unreadable
        raise InputError(
            str(path), None, f"cannot be read ({exc})", "re-run the stage that writes it"
        ) from None
    except (UnicodeDecodeError, csv.Error) as exc:
        line = None if isinstance(exc, UnicodeDecodeError) else reader.line_num  # decoded whole
        raise InputError(
            str(path), line, f"not a plot's CSV ({exc})", "re-run the stage that writes it"
        ) from None
    return rows


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round numbers covering [low, high]."""
    if high <= low:
        high = low + 1
    raw = (high - low) / count
    step = 10 ** math.floor(math.log10(raw))
    step = next(s * step for s in (1, 2, 2.5, 5, 10) if s * step >= raw)
    first = math.floor(low / step) * step
    return [round(first + i * step, 10) for i in range(math.ceil((high - first) / step) + 1)]


def _text(x: float, y: float, text: str, css: str = "", anchor: str = "start") -> str:
    kind = f' class="{css}"' if css else ""
    align = "" if anchor == "start" else f' text-anchor="{anchor}"'
    return f'<text{kind} x="{_n(x)}" y="{_n(y)}"{align}>{svg_text(text)}</text>'


def _grid(x1: float, y1: float, x2: float, y2: float) -> str:
    return f'<line class="grid" x1="{_n(x1)}" y1="{_n(y1)}" x2="{_n(x2)}" y2="{_n(y2)}"/>'


def _open(width: float, height: float, title: str, kind: str) -> list[str]:
    return [
        f'<svg class="chart plot plot-{kind}" viewBox="0 0 {_n(width)} {_n(height)}" font-size="{_n(_FONT)}" '
        'font-family="system-ui, sans-serif" role="img" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{svg_text(title)}</title>",
    ]


def bars_svg(rows: Sequence[Row], x: str, y: str, title: str) -> str:
    values = [(r.get(y, ""), _number(r.get(x)), _number(r.get("sd")), r.get("phase", "")) for r in rows]
    known = [v for _, v, _, _ in values if v is not None]
    top = max([0.0, *(v + (sd or 0) for _, v, sd, _ in values if v is not None)])
    ticks = _ticks(min([0.0, *known]), top)
    low, high = ticks[0], ticks[-1]
    left = max([80.0, *(text_width(label) + 16 for label, *_ in values)])
    bottom = 30 + len(values) * (_BAR + _GAP)
    out = _open(left + _PLOT_W + 70, bottom + 30, title, "bars")

    def at(value: float) -> float:
        return left + (value - low) / (high - low) * _PLOT_W

    for tick in ticks:
        out += [
            _grid(at(tick), 22, at(tick), bottom),
            _text(at(tick), bottom + 14, _label(tick), "tick", "middle"),
        ]
    for index, (label, value, sd, phase) in enumerate(values):
        y0 = 26 + index * (_BAR + _GAP)
        out.append(_text(left - 8, y0 + 11, label, anchor="end"))
        if value is None:
            out.append(_text(left + 4, y0 + 11, "no value", "tick"))
            continue
        kind = phase if phase in ("before", "after") else "bar"
        start, end = sorted((at(0.0), at(value)))
        out.append(
            f'<rect class="{kind}" x="{_n(start)}" y="{_n(y0)}" width="{_n(end - start)}" '
            f'height="{_n(_BAR)}"><title>{svg_text(f"{label}: {_label(value)}")}</title></rect>'
        )
        if sd:
            mid = _n(y0 + _BAR / 2)
            out.append(f'<path class="whisker" d="M{_n(at(value - sd))} {mid} H{_n(at(value + sd))}"/>')
        out.append(_text(at(high) + 8, y0 + 11, _label(value), "value"))
    out.append(_text(left + _PLOT_W / 2, bottom + 26, x, "axis", "middle"))
    return "\n".join(out) + "\n</svg>"


@dataclass(frozen=True)
class _Frame:
    """The plot area of an x-y chart: its ticks, and where a point lands."""

    xticks: list[float]
    yticks: list[float]
    left: float = 50.0
    top: float = 20.0

    def at(self, px: float, py: float) -> tuple[float, float]:
        fx = (px - self.xticks[0]) / (self.xticks[-1] - self.xticks[0])
        fy = (py - self.yticks[0]) / (self.yticks[-1] - self.yticks[0])
        return self.left + fx * _PLOT_W, self.top + (1 - fy) * _PLOT_H

    def axes(self) -> list[str]:
        bottom, out = self.top + _PLOT_H, []
        for tick in self.xticks:
            gx = self.at(tick, self.yticks[0])[0]
            out += [_grid(gx, self.top, gx, bottom), _text(gx, bottom + 14, _label(tick), "tick", "middle")]
        for tick in self.yticks:
            gy = self.at(self.xticks[0], tick)[1]
            right = self.left + _PLOT_W
            out += [
                _grid(self.left, gy, right, gy),
                _text(self.left - 6, gy + 4, _label(tick), "tick", "end"),
            ]
        return out


def _series(
    frame: _Frame,
    name: str,
    colour: str,
    points: list[tuple[float, float]],
    what: tuple[str, str],
    *,
    line: bool,
) -> list[str]:
    """One series: a line through its points (sorted by x) if asked, and a point each."""
    out = []
    if line and len(points) > 1:
        drawn = " ".join(f"{_n(cx)},{_n(cy)}" for cx, cy in (frame.at(px, py) for px, py in sorted(points)))
        out.append(f'<polyline class="{colour}" points="{drawn}"><title>{svg_text(name)}</title></polyline>')
    x, y = what
    for px, py in points:
        cx, cy = frame.at(px, py)
        label = svg_text(f"{name + ': ' if name else ''}{x} {_label(px)}, {y} {_label(py)}")
        out.append(
            f'<circle class="{colour}" cx="{_n(cx)}" cy="{_n(cy)}" r="3"><title>{label}</title></circle>'
        )
    return out


def xy_svg(rows: Sequence[Row], x: str, y: str, title: str, *, lines: bool) -> str:
    points = [(r.get("series", ""), _number(r.get(x)), _number(r.get(y))) for r in rows]
    known = [(s, px, py) for s, px, py in points if px is not None and py is not None]
    xs, ys = [p[1] for p in known] or [0.0], [p[2] for p in known] or [0.0]
    frame = _Frame(_ticks(min(xs), max(xs)), _ticks(min(ys), max(ys)))
    out = _open(frame.left + _PLOT_W + 20, frame.top + _PLOT_H + 44, title, "lines" if lines else "scatter")
    out += frame.axes()
    series = list(dict.fromkeys(s for s, _, _ in known))
    for number, name in enumerate(series):
        mine = [(px, py) for s, px, py in known if s == name]
        out += _series(frame, name, f"s{number % _SERIES}", mine, (x, y), line=lines)
    count = f"; {len(series)} series" if len(series) > 1 else ""
    middle, bottom = frame.left + _PLOT_W / 2, frame.top + _PLOT_H + 34
    out.append(_text(middle, bottom, f"{x} → ; {y} ↑{count}", "axis", "middle"))
    return "\n".join(out) + "\n</svg>"


def plot_svg(rows: Sequence[Row], *, x: str, y: str, title: str, template: str | None) -> str:
    """One DVC plot as SVG, drawn as its template says."""
    if template == "bar_horizontal":
        return bars_svg(rows, x, y, title)
    return xy_svg(rows, x, y, title, lines=template != "scatter")


def standalone(svg: str, stylesheet: str) -> str:
    """An SVG that renders alone (a file, an image in a README): the page's stylesheet inside it."""
    head, _, rest = svg.partition(">")
    return f"{head}>\n<style>{escape(stylesheet, quote=False)}</style>{rest}\n"
