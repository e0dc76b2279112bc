"""The one stage runner: `python -m stages DESIGN STAGE` runs any registered design's stage by name.

It imports that design alone (pipeline.experiments.registry) and that stage's code alone (its
Stage's `run` reference), and reads only that design's params.yaml sections, so that what DVC
tracks for the stage (its code dependencies, its params) is what it runs. An LLM stage (an LLMStep)
reads its inputs from the files of its design's earlier stages, makes its calls through a session
whose calls are recorded in recordings/<stage>/ when it succeeds, and writes its results to its
first out; any other stage is a function of the design's params.

Every stage says when it starts and when it ends (pipeline.llm.progress), on stderr: an LLM stage
first dry-runs its step as `judgeloop status` does (pipeline.tools.status.probe), so that its first
line says how many calls it expects and how many go to the model, and on a terminal a bar follows
them; its last line says what happened (calls, hits, misses, what its step counts, the time).

A stage runs its step once where it can: when the dry run needed no model (every call recorded or
in the local cache: a replay, a rerun) and the stage's session serves each of its calls the same
reply, looked up and verified as the run looks them up, the dry run's results are the stage's
(`adopt`), and each of its calls is served through the session, recorded and counted; otherwise
the step runs again for real.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import click

from pipeline.errors import JudgeloopError
from pipeline.experiments.design import Design, Stage
from pipeline.experiments.registry import load_design
from pipeline.experiments.steps import LLMStep, Output, R
from pipeline.llm.settings import EngineSettings
from pipeline.llm.terminal import escape_logs

if TYPE_CHECKING:  # named only: a stage that calls no model does not load the engine
    from pipeline.llm.progress import Expected
    from pipeline.llm.session import LLMSession
    from pipeline.tools.status.probe import DryCall, StageProbe


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


def dry_run(
    stage: Stage, step: LLMStep[Any, Any, Any], params: EngineSettings, session: LLMSession, inputs: Any
) -> tuple[Expected, StageProbe[Any]]:
    """The calls the stage will make, as `judgeloop status` predicts them: its step dry-run with no
    model against the recordings and the local cache (nothing is written, nothing is sent)."""
    from pathlib import Path

    from pipeline.llm.progress import Expected
    from pipeline.tools.status.probe import probe_stage

    items = step.items(inputs)
    probe = probe_stage(
        stage.name,
        lambda dry: step.work(params, dry, inputs),
        items,
        step.output,
        identity=session.identity,
        index=session.index,
        cache_dir=Path(params.cache.dir),
        counted=set(),
    )
    model_calls = probe.calls if session.mode in ("refresh", "off") else len(probe.model_calls)
    exact = not (probe.stopped or probe.unknown_output or step.decides_on_unknown(params))
    return Expected(calls=probe.calls, model_calls=model_calls, exact=exact, items=len(items)), probe


def served_alike(session: LLMSession, dry: list[DryCall]) -> bool:
    """Whether the session serves every call of the dry run, looked up as the stage looks it up (in
    its cache mode's order, verified), with the very reply the dry run was given."""
    for call in dry:
        record = session.lookup(call.key)
        if record is None or record.key != call.key:
            return False
        if record.checksum != call.checksum and record.reply != call.reply:
            return False
    return True


def adopt(session: LLMSession, expected: Expected, probe: StageProbe[Any]) -> list[Any] | None:
    """The dry run's results, when its pass can stand for the stage's own: it needed no model (no
    call left for one, no item stopped, nothing unknown) and the session serves each of its calls
    the same reply (served_alike). Every call is then served through the session (as a hit,
    recorded, counted, shown), and the step is not run a second time. None: run the step."""
    if expected.model_calls or not expected.exact or session.mode not in ("auto", "replay"):
        return None
    if not served_alike(session, probe.served):
        return None
    for call in probe.served:
        session.serve(call.key, call.context)
    return probe.results


def run_llm_step(
    design: Design[Any], stage: Stage, step: LLMStep[Any, Any, Any], params: EngineSettings
) -> None:
    from pipeline.llm.progress import StageProgress
    from pipeline.llm.stage import recorded_session  # only a stage that calls a model imports the engine

    began = time.monotonic()
    inputs = step.inputs(params, FileUpstream(design, params))
    with recorded_session(params, stage.name) as session:
        probe: StageProbe[Any] | None = None
        try:
            expected, probe = dry_run(stage, step, params, session, inputs)
            unknown = ""
        except JudgeloopError as exc:  # the run meets the same problem, and says so in full
            expected, unknown = None, f"calls not predicted ({exc.message})"
        progress = StageProgress(stage.name, expected, mode=session.mode, unknown=unknown, started=began)
        progress.start()
        session.observe(progress.call)
        try:
            results = adopt(session, expected, probe) if expected and probe else None
            if results is None:
                results = step.work(params, session, inputs)
        except BaseException:
            progress.finish(failed=True)
            raise
    step.output.write(design.results_path(stage.name, params), results)
    progress.finish(step.done(results) if step.done is not None else None)


def run_stage(design_name: str, stage_name: str) -> None:
    design, stage, run = load(design_name, stage_name)
    params = design.load_params()
    if isinstance(run, LLMStep):
        run_llm_step(design, stage, run, params)
        return
    click.echo(f"{stage.name}: starting (it calls no model)", err=True)
    started = time.monotonic()
    run(params)
    click.echo(f"{stage.name}: done in {time.monotonic() - started:.1f} s", err=True)


@click.command()
@click.argument("design")
@click.argument("stage")
def main(design: str, stage: str) -> None:
    """Run STAGE of DESIGN, as dvc.yaml's stage of that name does."""
    escape_logs()  # a stage's warnings quote what others wrote: a server's words, an item's id
    run_stage(design, stage)
