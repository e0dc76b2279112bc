"""The paper's judge and feedback loop (AI Psychiatrist, Figure 2): assess -> judge -> refine -> aggregate."""

from __future__ import annotations

from pipeline.experiments.design import Design, Plot, Stage
from pipeline.experiments.paper.params import PaperParams

_HERE = "pipeline.experiments.paper"

DESIGN = Design(
    name="paper",
    title="the paper's judge and feedback loop",
    params=PaperParams,
    stages=(
        Stage(
            "assess",
            run=f"{_HERE}.assess:STEP",
            deps=("${data.transcripts}",),
            outs=("${assess.out}",),
            params=("data", "assess"),
        ),
        Stage(
            "judge",
            run=f"{_HERE}.judge:STEP",
            deps=("${assess.out}", "${data.transcripts}"),
            outs=("${judge.out}",),
            params=("data", "judge"),
        ),
        Stage(
            "refine",
            run=f"{_HERE}.refine:STEP",
            deps=("${assess.out}", "${judge.out}", "${data.transcripts}"),
            outs=("${refine.out}",),
            params=("data", "refine", "assess", "judge"),
        ),
        Stage(
            "aggregate",
            run=f"{_HERE}.aggregate:run",
            deps=("${refine.out}", "recordings/assess", "recordings/judge", "recordings/refine"),
            # The item pages' folder is named after the index (pipeline.reports.pages.pages_folder).
            outs=("${aggregate.report}", "${aggregate.html_report}", "outputs/paper/report"),
            # judge.decimal_scores: the report reads each judge reply again, as the judge stage did.
            params=("aggregate", "judge.metrics", "judge.decimal_scores"),
            metrics=("${aggregate.metrics_out}",),
            plots=(
                Plot(
                    "${aggregate.plots_dir}/figure2.csv",
                    template="bar_horizontal",
                    x="mean",
                    y="bar",
                    title="Judge scores before and after the feedback loop (paper Figure 2)",
                ),
                Plot(
                    "${aggregate.plots_dir}/scores_by_iteration.csv",
                    x="iteration",
                    y="score",
                    title="Score per iteration, per item and metric",
                ),
                Plot(
                    "${aggregate.plots_dir}/iterations_per_item.csv",
                    template="bar_horizontal",
                    x="iterations",
                    y="item",
                    title="Refinement iterations per item",
                ),
            ),
        ),
    ),
    report=f"{_HERE}.aggregate:report",
    headline=f"{_HERE}.headline:headline",
    judgements=f"{_HERE}.judgements:judgements",
    reads=f"{_HERE}.replies:reads",
)
