"""Regenerate on a low score (seed 004), on RAG rows: regen_generate -> regen_evaluate ->
regen_regenerate -> regen_aggregate. `dvc exp run -S regenerate.enabled=true` turns the policy on."""

from __future__ import annotations

from pipeline.experiments.design import Design, Stage
from pipeline.experiments.regen.params import RegenParams

_HERE = "pipeline.experiments.regen"

DESIGN = Design(
    name="regen",
    title="regenerate on a low score (seed 004)",
    params=RegenParams,
    stages=(
        Stage(
            "regen_generate",
            run=f"{_HERE}.generate:STEP",
            deps=("${regen_generate.rows}",),
            outs=("${regen_generate.out}",),
            params=("regen_generate",),
        ),
        Stage(
            "regen_evaluate",
            run=f"{_HERE}.evaluate:STEP",
            deps=("${regen_generate.out}", "${regen_generate.rows}"),
            outs=("${regen_evaluate.out}",),
            params=("regen_generate.rows", "regen_generate.limit", "regen_generate.out", "regen_evaluate"),
        ),
        Stage(
            "regen_regenerate",
            run=f"{_HERE}.regenerate:STEP",
            deps=("${regen_evaluate.out}", "${regen_generate.rows}"),
            outs=("${regenerate.out}",),
            params=("regenerate", "regen_generate", "regen_evaluate"),
        ),
        Stage(
            "regen_aggregate",
            run=f"{_HERE}.aggregate:run",
            deps=(
                "${regenerate.out}",
                "${regen_generate.rows}",
                "recordings/regen_generate",
                "recordings/regen_evaluate",
                "recordings/regen_regenerate",
            ),
            outs=("${regen_aggregate.items_out}", "${regen_aggregate.html_report}"),
            params=(
                "regen_aggregate",
                "regenerate.threshold",
                "regenerate.enabled",
                "regenerate.out",
                "regen_generate.rows",
                "regen_generate.limit",
                "regen_generate.answers",
            ),
            metrics=("${regen_aggregate.metrics_out}",),
        ),
    ),
    report=f"{_HERE}.aggregate:report",
    headline=f"{_HERE}.headline:headline",
    judgements=f"{_HERE}.judgements:judgements",
    reads=f"{_HERE}.replies:reads",
)
