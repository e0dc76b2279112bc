"""The README's pictures, drawn from the project itself: `judgeloop report --figures docs`.

    docs/pipeline.svg          every design's stages, from the registry (the stages that call a
                               model marked: their calls go through the cache into recordings/)
    docs/<design>-<plot>.svg   each design's plots, from its committed plot files

Each is a standalone SVG (the report's stylesheet inside), so it renders as an image on a code
host, and the same inputs give the same bytes: tests/test_report_index.py fails when a committed
picture is not the one these files give.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.experiments.design import Design, resolve
from pipeline.experiments.registry import designs
from pipeline.experiments.steps import LLMStep
from pipeline.llm.files import atomic_write
from pipeline.reports.frame import asset
from pipeline.reports.plots import plot_svg, read_rows, standalone
from pipeline.reports.svg import svg_text, text_width

_ROW, _BOX_H, _GAP, _FONT = 46.0, 26.0, 22.0, 12.0

PIPELINE_CSS = """
svg{font-family:system-ui,sans-serif;font-size:12px}text{fill:#1f2328}.muted{fill:#5d6670}
rect.stage{fill:#fff;stroke:#8a96a3}rect.llm{fill:#e3f0f6;stroke:#2f6f8f}
path.arrow{stroke:#8a96a3;fill:none;marker-end:url(#head)}#head path{fill:#8a96a3}.design{font-weight:600}
"""


def _n(value: float) -> str:
    text = f"{value:.1f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _calls_model(design: Design[Any], name: str) -> bool:
    return isinstance(design.stage(name).load(), LLMStep)


def pipeline_svg(found: list[Design[Any]]) -> str:
    """One row a design: its name, then its stages left to right; the LLM stages shaded."""
    label_w = max([120.0, *(text_width(d.name, _FONT) + 24 for d in found)])
    rows = []
    width = 0.0
    for index, design in enumerate(found):
        y = 58 + index * _ROW
        x = label_w
        parts = [f'<text class="design" x="12" y="{_n(y + 17)}">{svg_text(design.name)}</text>']
        for number, stage in enumerate(design.stages):
            box = text_width(stage.name, _FONT) + 20
            kind = "stage llm" if _calls_model(design, stage.name) else "stage"
            size = f'width="{_n(box)}" height="{_n(_BOX_H)}"'
            parts.append(f'<rect class="{kind}" x="{_n(x)}" y="{_n(y)}" {size} rx="4"/>')
            parts.append(f'<text x="{_n(x + 10)}" y="{_n(y + 17)}">{svg_text(stage.name)}</text>')
            if number < len(design.stages) - 1:
                mid = _n(y + _BOX_H / 2)
                parts.append(f'<path class="arrow" d="M{_n(x + box + 2)} {mid} h{_n(_GAP - 6)}"/>')
            x += box + _GAP
        width = max(width, x)
        rows += parts
    height = 58 + len(found) * _ROW + 8
    legend_x = label_w
    head = [
        f'<svg viewBox="0 0 {_n(width + 12)} {_n(height)}" role="img" xmlns="http://www.w3.org/2000/svg">',
        "<title>judgeloop: every design's DVC stages</title>",
        f"<style>{PIPELINE_CSS}</style>",
        '<defs><marker id="head" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" '
        'orient="auto"><path d="M0 0 L8 4 L0 8 z"/></marker></defs>',
        f'<rect class="stage llm" x="{_n(legend_x)}" y="12" width="14" height="14" rx="3"/>',
        f'<text class="muted" x="{_n(legend_x + 20)}" y="24">calls the model: every call through the cache, '
        "recorded in recordings/&lt;stage&gt;/</text>",
        f'<rect class="stage" x="{_n(legend_x)}" y="32" width="14" height="14" rx="3"/>',
        f'<text class="muted" x="{_n(legend_x + 20)}" y="44">reads files only: metrics.json, plots, report '
        "pages in outputs/&lt;design&gt;/</text>",
    ]
    return "\n".join([*head, *rows, "</svg>"]) + "\n"


def figures() -> dict[str, str]:
    """File name -> standalone SVG: the pipeline, and every design's plots that exist."""
    found = designs()
    drawn = {"pipeline.svg": pipeline_svg(found)}
    for design in found:
        params = design.load_params()
        for stage in design.stages:
            for plot in stage.plots:
                path = resolve(plot.path, params)
                if path.is_file():
                    svg = plot_svg(
                        read_rows(path), x=plot.x, y=plot.y, title=plot.title, template=plot.template
                    )
                    drawn[f"{design.name}-{path.stem}.svg"] = standalone(svg, asset("report.css"))
    return drawn


def write_figures(folder: Path) -> list[Path]:
    written = []  # each write makes the folder, refusing one linked out (files.folder_to_write)
    for name, svg in figures().items():
        atomic_write(folder / name, svg)
        written.append(folder / name)
    return written
