"""The SummEval calibrate stage: the judge against the people's ratings: metrics, plot data, page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.data.recorded_models import design_model
from pipeline.errors import InputError
from pipeline.experiments.design import CalibrationRows
from pipeline.experiments.summeval.calibration import (
    LLM_STAGES,
    ExperimentRows,
    experiment_rows,
    plot_csv,
    summeval_metrics,
)
from pipeline.experiments.summeval.params import SummEvalParams
from pipeline.experiments.summeval.report import render_summeval_html
from pipeline.llm.files import atomic_write
from pipeline.llm.keys import canonical_json
from pipeline.llm.recordings.verified_memo import VerifiedMemo


def _write(path: str, text: str) -> Path:
    target = Path(path)
    atomic_write(target, text)  # in one step: a failed run keeps the last good output (persist: true)
    return target


def _write_page(params: SummEvalParams, rows: ExperimentRows, metrics: dict[str, Any]) -> Path:
    memo = VerifiedMemo.beside(Path(params.cache.dir))  # verified in full before: not again
    model = design_model(Path(params.cache.recordings), LLM_STAGES, memo)  # as recorded, not as params say
    title = f"judgeloop SummEval calibration: {model}"
    page = Path(params.summeval.html_report)
    return _write(str(page), render_summeval_html(metrics, rows.judgements, rows.humans, title, page))


def run(params: SummEvalParams) -> None:
    settings = params.summeval
    rows = experiment_rows(params)
    _, metrics = summeval_metrics(params, rows)
    _write(settings.metrics_out, canonical_json(metrics) + "\n")
    _write(settings.plot_csv, plot_csv(rows))
    _write_page(params, rows, metrics)


def report(params: SummEvalParams) -> list[Path]:
    """The page again, as the stage writes it."""
    rows = experiment_rows(params)
    return [_write_page(params, rows, summeval_metrics(params, rows)[1])]


def calibration_rows(params: SummEvalParams) -> CalibrationRows:
    """`judgeloop calibrate --experiment summeval`: the judge step's own rows against the corpus's
    ratings, with the bootstrap of the experiment's metrics."""
    rows = experiment_rows(params)
    if not rows.scores:
        raise InputError(params.summeval.out, None, "no judgements", "run `dvc repro summeval_judge` first")
    return CalibrationRows(rows.scores, rows.humans, params.summeval.resamples, params.summeval.seed)
