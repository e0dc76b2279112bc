"""The one stage runner: `python -m stages DESIGN STAGE` runs any registered design's stage by name.

It imports that design alone (pipeline.experiments.registry) and that stage's code alone (its
Stage's `run` reference), and reads only that design's params.yaml sections, so that what DVC
tracks for the stage (its code dependencies, its params) is what it runs. An LLM stage (an LLMStep)
reads its inputs from the files of its design's earlier stages, makes its calls through a session
whose calls are recorded in recordings/<stage>/ when it succeeds, and writes its results to its
first out; any other stage is a function of the design's params.
"""

from __future__ import annotations

from typing import Any

import click

from pipeline.experiments.design import Design, Stage
from pipeline.experiments.registry import load_design
from pipeline.experiments.steps import LLMStep, Output, R
from pipeline.llm.settings import EngineSettings


def load(design_name: str, stage_name: str) -> tuple[Design[Any], Stage, Any]:
    """The design, its stage and what runs it, imported as a run imports them."""
    design = load_design(design_name)
    stage = design.stage(stage_name)
    return design, stage, stage.load()


class FileUpstream:
    """An earlier stage's results, read from the file it wrote."""

    def __init__(self, design: Design[Any], params: EngineSettings) -> None:
        self.design, self.params = design, params

    def __call__(self, stage: str, output: Output[R]) -> list[R]:
        if output.read is None:
            raise TypeError(f"stage {stage}'s results are not read back (its Output has no read)")
        return output.read(self.design.results_path(stage, self.params))


def run_llm_step(
    design: Design[Any], stage: Stage, step: LLMStep[Any, Any, Any], params: EngineSettings
) -> None:
    from pipeline.llm.stage import recorded_session  # only a stage that calls a model imports the engine

    inputs = step.inputs(params, FileUpstream(design, params))
    with recorded_session(params, stage.name) as session:
        results = step.work(params, session, inputs)
    step.output.write(design.results_path(stage.name, params), results)
    if step.done is not None:
        click.echo(step.done(results), err=True)


def run_stage(design_name: str, stage_name: str) -> None:
    design, stage, run = load(design_name, stage_name)
    params = design.load_params()
    if isinstance(run, LLMStep):
        run_llm_step(design, stage, run, params)
    else:
        run(params)


@click.command()
@click.argument("design")
@click.argument("stage")
def main(design: str, stage: str) -> None:
    """Run STAGE of DESIGN, as dvc.yaml's stage of that name does."""
    run_stage(design, stage)
