"""The report index over every design (outputs/index.html): what ran, the headline numbers, the
plots, and a link to each design's own report.

Written by the last stage of dvc.yaml, `report_index` (`python -m stages.index`, which depends on
every design's metrics and plots), and again by `judgeloop report`. Every design comes from the
registry: a new one appears here with no edit. Its numbers are its Design.headline (the same
`judgeloop compare` shows), its plots the files its stages declare for `dvc plots`, drawn as inline
SVG (pipeline.reports.plots) so that they render with no network; `dvc plots show` needs Vega from
a CDN. A design that has not run yet is listed as such.

The model each design names is the one its stages' recordings hold (pipeline.data.recorded_models),
never params.yaml's `llm`, which may have changed since, or been overridden for one design. When the
designs' recordings name different models, each design says its own; the header names them all.
After a `judgeloop repro` of some stages only, the index is written again and names the designs whose
stages DVC finds out of date, with the command that brings each up to date (`stale`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from markupsafe import Markup

from pipeline.data.recorded_models import NONE_RECORDED, design_model
from pipeline.errors import JudgeloopError
from pipeline.experiments.design import Design, Number, load_ref, resolve
from pipeline.experiments.params import load_params
from pipeline.experiments.registry import designs
from pipeline.llm.bounds import MAX_LINE_BYTES, depth_problem
from pipeline.llm.files import atomic_write, read_regular
from pipeline.llm.recordings.verified_memo import VerifiedMemo
from pipeline.reports.frame import INDEX, frame
from pipeline.reports.plots import plot_svg, read_rows
from pipeline.reports.templating import make_environment

TITLE = "judgeloop: every design"


@dataclass
class Figure:
    title: str
    source: str  # the plot file, relative to the index
    svg: Markup  # drawn here from numbers, every label escaped (pipeline.reports.plots)


@dataclass
class Entry:
    """One design on the index."""

    name: str
    title: str
    stages: list[str]
    ran: bool
    report: str | None = None  # its report page, relative to the index
    metrics: str | None = None
    headline: list[tuple[str, str]] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    problem: str | None = None  # why its numbers cannot be shown
    model: str = NONE_RECORDED  # as its recordings name it (pipeline.data.recorded_models)
    stale: str | None = None  # the command that brings its out-of-date stages up to date


def _href(path: Path, index: Path) -> str:
    return Path(os.path.relpath(path.resolve(), index.parent.resolve())).as_posix()  # no link at its name


def _number(value: Number | None) -> str:
    if value is None:
        return "—"
    return str(value) if isinstance(value, int) else f"{value:.4f}".rstrip("0").rstrip(".")


def _metrics(path: Path) -> dict[str, Any]:
    """A design's metrics.json, bounded before its headline walks it (pipeline.llm.bounds): orjson
    refuses nesting past 1,024 levels (json raised RecursionError) and a lone surrogate."""
    metrics = orjson.loads(read_regular(path, MAX_LINE_BYTES))  # never a pipe or /dev/zero put there
    if not isinstance(metrics, dict):
        raise ValueError("not a JSON object")
    if (deep := depth_problem(metrics)) is not None:
        raise ValueError(deep)
    return metrics


def _figures(design: Design[Any], params: Any, index: Path) -> list[Figure]:
    figures = []
    for stage in design.stages:
        for plot in stage.plots:
            path = resolve(plot.path, params)
            if path.is_file():
                svg = plot_svg(read_rows(path), x=plot.x, y=plot.y, title=plot.title, template=plot.template)
                figures.append(Figure(plot.title, _href(path, index), Markup(svg)))
    return figures


def entry(design: Design[Any], index: Path) -> Entry:
    found = Entry(design.name, design.title, [s.name for s in design.stages], ran=False)
    try:
        params = design.load_params()
    except JudgeloopError as exc:
        found.problem = f"its params cannot be read: {exc.message}"
        return found
    try:
        stages = [s.name for s in design.stages]
        memo = VerifiedMemo.beside(Path(params.cache.dir))  # verified in full before: not again
        found.model = design_model(Path(params.cache.recordings), stages, memo)
    except JudgeloopError as exc:
        found.problem = f"its recordings cannot be read: {exc.message}"
        return found
    metrics_path, report_path = design.metrics_path(params), design.report_path(params)
    if report_path is not None and report_path.is_file():
        found.report = _href(report_path, index)
    if metrics_path is None or not metrics_path.is_file():
        return found
    found.ran, found.metrics = True, _href(metrics_path, index)
    if design.headline is not None:
        try:
            metrics = _metrics(metrics_path)
            found.headline = [(label, _number(value)) for label, value in load_ref(design.headline)(metrics)]
        except (OSError, ValueError, KeyError, TypeError) as exc:  # a metrics file someone edited
            found.problem = f"{metrics_path} cannot be read: {exc}"
            return found
    found.figures = _figures(design, params, index)
    return found


def models_named(entries: list[Entry]) -> str:
    """The header's model: the one every design that ran recorded, or each design's, by design."""
    models = list(dict.fromkeys(e.model for e in entries if e.model != NONE_RECORDED))
    if len(models) <= 1:
        return models[0] if models else NONE_RECORDED
    return "; ".join(f"{e.name}: {e.model}" for e in entries if e.model != NONE_RECORDED)


def render_index(index: Path, stale: Mapping[str, str] | None = None) -> str:
    """The page. stale: design name -> the command that brings its out-of-date stages up to date."""
    entries = [entry(design, index) for design in designs()]
    for found in entries:
        found.stale = (stale or {}).get(found.name)
    named = models_named(entries)
    several = len({e.model for e in entries if e.model != NONE_RECORDED}) > 1
    template = make_environment().get_template("index.html.j2")
    page = frame(index, TITLE)
    page["home"] = None  # this is the index
    return template.render(**page, entries=entries, model=named, several_models=several)


def write_index(index: Path = INDEX, stale: Mapping[str, str] | None = None) -> Path:
    load_params()  # a params.yaml that cannot be read fails here, naming its line
    html = render_index(index, stale)
    atomic_write(index, html)  # replaces a link at its name, never writes through it
    return index


def load_all() -> None:
    """Import what writing the index imports, design by design (its code dependencies, for dvc.yaml)."""
    for design in designs():
        if design.headline is not None:
            load_ref(design.headline)
