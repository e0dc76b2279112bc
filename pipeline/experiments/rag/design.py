"""The RAG answer judge (seed 002): every row judged once on rag.dimensions with a structured reply
(rag_judge), then agreement with the rows' human labels (rag_aggregate)."""

from __future__ import annotations

from pipeline.experiments.design import Design, Stage
from pipeline.experiments.rag.params import RagParams

_HERE = "pipeline.experiments.rag"

DESIGN = Design(
    name="rag",
    title="RAG answer judge (seed 002)",
    params=RagParams,
    stages=(
        Stage(
            "rag_judge",
            run=f"{_HERE}.judge:STEP",
            deps=("${rag.rows}",),
            outs=("${rag.out}",),
            params=tuple(
                f"rag.{key}"
                for key in (
                    "rows",
                    "only",
                    "limit",
                    "dimensions",
                    "prompt_mode",
                    "max_context_chars",
                    "num_predict",
                    "max_attempts",
                    "logprobs",
                    "samples",
                    "out",
                )
            ),
        ),
        Stage(
            "rag_aggregate",
            run=f"{_HERE}.aggregate:run",
            deps=("${rag.out}", "${rag.rows}", "recordings/rag_judge"),
            outs=("${rag.report_md}", "${rag.report_html}"),
            params=("rag",),
            metrics=("${rag.metrics_out}",),
        ),
    ),
    report=f"{_HERE}.aggregate:report",
    commands={"judge-evaluate": f"{_HERE}.judge_evaluate:judge_evaluate"},
    headline=f"{_HERE}.headline:headline",
    reads=f"{_HERE}.replies:reads",
    judgements=f"{_HERE}.judgements:judgements",
)
