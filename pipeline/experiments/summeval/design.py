"""Calibration against people (SummEval): summeval_judge -> summeval_calibrate. The corpus path is a
parameter: the committed demo is the fictional data/summeval-demo; the real corpus stays outside
the repository (README: "The SummEval experiment")."""

from __future__ import annotations

from pipeline.experiments.design import Design, Plot, Stage
from pipeline.experiments.summeval.params import SummEvalParams

_HERE = "pipeline.experiments.summeval"

DESIGN = Design(
    name="summeval",
    title="calibration against people (SummEval)",
    params=SummEvalParams,
    stages=(
        Stage(
            "summeval_judge",
            run=f"{_HERE}.judge:STEP",
            deps=("${summeval.corpus}",),
            outs=("${summeval.out}",),
            params=tuple(
                f"summeval.{key}"
                for key in (
                    "corpus",
                    "documents",
                    "dimensions",
                    "num_predict",
                    "max_attempts",
                    "top_logprobs",
                    "out",
                )
            ),
        ),
        Stage(
            "summeval_calibrate",
            run=f"{_HERE}.aggregate:run",
            deps=("${summeval.out}", "${summeval.corpus}", "recordings/summeval_judge"),
            outs=("${summeval.html_report}",),
            params=("summeval",),
            metrics=("${summeval.metrics_out}",),
            plots=(
                Plot(
                    "${summeval.plot_csv}",
                    template="scatter",
                    x="human_mean",
                    y="judge_weighted",
                    title="SummEval, judge (weighted score) against the mean expert rating",
                ),
            ),
        ),
    ),
    report=f"{_HERE}.aggregate:report",
    calibration=f"{_HERE}.aggregate:calibration_rows",
    headline=f"{_HERE}.headline:headline",
    reads=f"{_HERE}.replies:reads",
    judgements=f"{_HERE}.judgements:judgements",
)
