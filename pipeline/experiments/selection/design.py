"""Selection among candidates (seed 001): select_score -> select_pick -> select_aggregate."""

from __future__ import annotations

from pipeline.experiments.design import Design, Stage
from pipeline.experiments.selection.files import METRICS, PAGE, PICKS, SCORES
from pipeline.experiments.selection.params import SelectionParams

_HERE = "pipeline.experiments.selection"

DESIGN = Design(
    name="selection",
    title="selection among candidates (seed 001)",
    params=SelectionParams,
    stages=(
        Stage(
            "select_score",
            run=f"{_HERE}.score:STEP",
            deps=("${selection.catalog}", "${selection.requests}"),
            outs=(str(SCORES),),
            params=tuple(
                f"selection.{key}"
                for key in (
                    "catalog",
                    "requests",
                    "limit",
                    "pool_size",
                    "max_per_artist",
                    "framework",
                    "judge_num_predict",
                    "max_attempts",
                    "samples",
                    "combine",
                )
            ),
        ),
        Stage(
            "select_pick",
            run=f"{_HERE}.pick:STEP",
            deps=(str(SCORES),),
            outs=(str(PICKS),),
            params=tuple(
                f"selection.{key}"
                for key in (
                    "k",
                    "lambda",
                    "tie_margin",
                    "max_exact_options",
                    "compare_num_predict",
                    "max_attempts",
                )
            ),
        ),
        Stage(
            "select_aggregate",
            run=f"{_HERE}.aggregate:run",
            deps=(str(SCORES), str(PICKS), "recordings/select_score", "recordings/select_pick"),
            outs=(str(PAGE),),
            metrics=(str(METRICS),),
        ),
    ),
    report=f"{_HERE}.aggregate:report",
    headline=f"{_HERE}.headline:headline",
    judgements=f"{_HERE}.judgements:judgements",
    reads=f"{_HERE}.replies:reads",
)
