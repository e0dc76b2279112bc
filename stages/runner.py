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

The dry run does not hold the model up (cache modes auto and replay): it runs in a thread of its
own, and once it meets a call for the model it can no longer stand for the stage, so the step starts
for real at once, its first requests at the server while the dry run goes on to its count (at the
paper's scale, a third of a second per stage that the server's slots otherwise sat idle,
bench/scale.py). The dry run then takes the local cache as it was when the stage began: a call the
stage has sent is no hit to it, whenever its reply is stored (ProbeBackend's `asked`). The start
line follows when the dry run ends, always before the end line.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from pipeline.errors import JudgeloopError
from pipeline.experiments.design import Design, Stage
from pipeline.experiments.registry import load_design
from pipeline.experiments.steps import LLMStep, Output, R
from pipeline.llm.settings import EngineSettings
from pipeline.llm.terminal import escape_logs
from pipeline.tools.local_state import refuse_committed_link

if TYPE_CHECKING:  # named only: a stage that calls no model does not load the engine
    from pipeline.llm.progress import Expected, StageProgress
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

    def file(self, stage: str, output: Output[R]) -> Iterable[R]:
        """The results read again an item at a time (steps.results_of), where the Output can."""
        if output.file is None:
            return self(stage, output)
        return output.file(self.design.results_path(stage, self.params))


@dataclass(frozen=True, slots=True)
class Staged:
    """What the dry run keeps of one result: its item, whether its text holds a reply not known yet
    (probe's MARK), and what the end line says of it (step.done's `of`). The result itself is
    written to the staged file as it comes, not held (issue 33)."""

    item: str
    unknown: bool
    tally: Any


class StagedResults:
    """The dry run's results written as they come to a file beside the stage's output, as the
    stage writes them (its Output's write: the same bytes), so that a dry run whose pass stands for
    the stage's (adopt) is published by a rename, and none of its results is held meanwhile.

    The file is a killed write's to pipeline.llm.killed_writes (`.<target>.dry-run.XXXXXXXX.locked.tmp`,
    under an flock while this stage holds it): another stage staging the same target at once (two
    runs of one project, `python -m stages` by hand beside DVC) has a file of its own, and one that
    a killed stage left is removed by the next write into that folder (an older judgeloop's fixed
    `.<target>.dry-run.tmp` too, here). The Output's write replaces the file by a rename, which
    lets go of the lock: it is taken again on the new file, and a file that a sweep took meanwhile
    (it is then gone) is not adopted: the step runs (`intact`)."""

    def __init__(self, step: LLMStep[Any, Any, Any], path: Path) -> None:
        from pipeline.llm.files import folder_to_write, new_file_mode
        from pipeline.llm.killed_writes import locked_temporary, sweep_killed_writers, temporary_prefix
        from pipeline.tools.status.probe import MARK

        self.step, self.target = step, path
        sweep_killed_writers(folder_to_write(path.parent, path))
        _remove_older_staged(path)
        held, name = locked_temporary(path.parent, temporary_prefix(path.with_name(f"{path.name}.dry-run")))
        os.fchmod(held.fileno(), new_file_mode(path))  # the Output's write keeps it: as a plain write's
        self.path, self._held, self.intact = Path(name), held, False
        self.output: Output[Staged] = Output(
            lambda staged: staged.item, lambda staged: MARK if staged.unknown else "", _unwritten
        )

    def write(self, results: Iterable[Any], model_call: threading.Event | None = None) -> list[Staged]:
        """`model_call` set: the dry run met a call for the model, so its results will not be
        adopted (adopt), and the rest are kept as Staged but no longer written."""
        from pipeline.tools.status.probe import MARK

        output, done, kept = self.step.output, self.step.done, []

        def staged(result: Any) -> Staged:
            tally = done.of(result) if done is not None else None
            return Staged(output.item_of(result), MARK in output.text_of(result), tally)

        def passing() -> Iterator[Any]:
            remaining = iter(results)
            for result in remaining:
                kept.append(staged(result))
                if model_call is not None and model_call.is_set():
                    kept.extend(staged(rest) for rest in remaining)
                    return
                yield result

        output.write(self.path, passing())
        self.intact = self._hold()
        return kept

    def _hold(self) -> bool:
        """The lock taken on the file the Output's write renamed into place; whether it is still there."""
        import fcntl

        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:  # taken by a sweep in the instant between the write's rename and here
            return False
        fcntl.flock(fd, fcntl.LOCK_EX)  # (a sweep holding it for an instant is waited for)
        held = os.fstat(fd)
        with contextlib.suppress(OSError):
            if held.st_nlink == 1 and os.path.samestat(held, os.lstat(self.path)):
                self._held.close()
                self._held = os.fdopen(fd, "rb")
                return True
        os.close(fd)
        return False

    def publish(self) -> None:
        try:
            os.replace(self.path, self.target)
        finally:
            self._held.close()

    def discard(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        self._held.close()  # (the lock held until the file is gone)


def _remove_older_staged(path: Path) -> None:
    """The staged file an older judgeloop's killed stage left, `.<target>.dry-run.tmp` (one name for
    every run, unlocked), removed as killed_writes removes a killed write's: a regular file of no
    other name that no one holds locked."""
    from pipeline.llm.killed_writes import TMP_SUFFIX, removed_if_killed

    try:
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        removed_if_killed(folder, f".{path.name}.dry-run{TMP_SUFFIX}")
    finally:
        os.close(folder)


def _unwritten(path: Path, results: Iterable[Staged]) -> None:
    raise TypeError("a staged result is written by StagedResults.write, as it comes")


def dry_run(
    stage: Stage,
    step: LLMStep[Any, Any, Any],
    params: EngineSettings,
    session: LLMSession,
    inputs: Any,
    model_call: threading.Event | None = None,
    staged: StagedResults | None = None,
) -> tuple[Expected, StageProbe[Any]]:
    """The calls the stage will make, as `judgeloop status` predicts them: its step dry-run with no
    model against the recordings and the local cache (nothing is sent), as the cache was before
    `session` sent anything. `model_call` is set at its first call for the model. With `staged`,
    its results are written there as they come, and the probe's results are Staged ones."""
    from pipeline.llm.progress import Expected
    from pipeline.tools.status.probe import probe_stage

    items = step.items(inputs)
    probe = probe_stage(
        stage.name,
        (lambda dry: staged.write(step.stream(params, dry, inputs), model_call))
        if staged is not None
        else (lambda dry: step.work(params, dry, inputs)),
        items,
        staged.output if staged is not None else step.output,
        identity=session.identity,
        index=session.index,
        cache_dir=Path(params.cache.dir),
        counted=set(),
        asked=session.asked,
        model_call=model_call,
    )
    model_calls = probe.calls if session.mode in ("refresh", "off") else len(probe.model_calls)
    exact = not (probe.stopped or probe.unknown_output or step.decides_on_unknown(params))
    return Expected(calls=probe.calls, model_calls=model_calls, exact=exact, items=len(items)), probe


def served_alike(session: LLMSession, dry: Iterable[DryCall]) -> bool:
    """Whether the session serves every call of the dry run, looked up as the stage looks it up (in
    its cache mode's order, verified), with the very reply the dry run was given."""
    from pipeline.tools.status.probe import reply_digest

    for call in dry:
        if session.served_checksum(call.key) == call.checksum:
            continue  # the record the session serves for this key: the dry run's (no request rebuilt)
        record = session.lookup(call.key)
        if record is None or record.key != call.key:
            return False
        if record.checksum != call.checksum and reply_digest(record.reply) != call.reply_digest:
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
    probe.served.close()  # its temporary file: read for the last time
    return probe.results


class Prediction:
    """The stage's dry run in a thread of its own; when it ends, the progress line's start.

    `decided` is set at the dry run's first call for the model (the step must run for real: it may
    start now) or at its end, whichever comes first."""

    def __init__(
        self,
        stage: Stage,
        step: LLMStep[Any, Any, Any],
        params: EngineSettings,
        session: LLMSession,
        inputs: Any,
        progress: StageProgress,
        staged: StagedResults | None = None,
    ) -> None:
        self.decided, self.ended = threading.Event(), threading.Event()
        self.expected: Expected | None = None
        self.probe: StageProbe[Any] | None = None
        self.stopped: JudgeloopError | None = None
        self._error: BaseException | None = None
        args = (stage, step, params, session, inputs, progress, staged)
        self._thread = threading.Thread(
            target=self._run, args=args, name=f"{stage.name}-dry-run", daemon=True
        )
        self._thread.start()

    def _run(
        self,
        stage: Stage,
        step: LLMStep[Any, Any, Any],
        params: EngineSettings,
        session: LLMSession,
        inputs: Any,
        progress: StageProgress,
        staged: StagedResults | None,
    ) -> None:
        try:
            try:
                self.expected, self.probe = dry_run(
                    stage, step, params, session, inputs, self.decided, staged
                )
            except JudgeloopError as exc:  # the run meets the same problem, and says so: once, at its end
                self.stopped = exc
                progress.unknown = "calls not predicted: the dry run stopped on an error, said below"
            progress.expected = self.expected
            progress.start()
        except BaseException as exc:  # raised in the stage's own thread, by join
            self._error = exc
        finally:
            self.ended.set()
            self.decided.set()

    def join(self) -> None:
        """Wait for the dry run's end; its error (other than a JudgeloopError), raised here."""
        self._thread.join()
        if self._error is not None:
            raise self._error

    def adopted(self, session: LLMSession) -> list[Any] | None:
        """The dry run's results as the stage's (adopt), once it has ended; None: run the step."""
        self.join()
        return adopt(session, self.expected, self.probe) if self.expected and self.probe else None


def step_results(
    step: LLMStep[Any, Any, Any],
    params: EngineSettings,
    session: LLMSession,
    inputs: Any,
    prediction: Prediction,
    path: Path,
    staged: StagedResults | None = None,
) -> list[Any]:
    """Write the step's results, and give what its end line says of each (step.done's `of`): the
    dry run's, published, where they can stand for the stage's, else the step run, its results
    written as they come, in the items' order, whole or not at all (issue 33: a stage never holds
    its results whole). The step starts as soon as the dry run met a call for the model in auto
    and replay mode (the modes whose dry run can see the local cache as it was before the stage,
    ProbeBackend), after it otherwise."""
    if session.mode in ("auto", "replay"):
        prediction.decided.wait()
    else:
        prediction.join()
    # A staged file that a sweep took (StagedResults.intact) is not adopted: the step runs, below.
    adoptable = prediction.ended.is_set() and (staged is None or staged.intact)
    if adoptable and (adopted := prediction.adopted(session)) is not None:
        if staged is None:  # not staged (adopt takes auto and replay alone, which stage): as it was
            step.output.write(path, adopted)
            return [step.done.of(result) for result in adopted] if step.done is not None else []
        staged.publish()
        return [result.tally for result in adopted]
    kept: list[Any] = []
    step.output.write(path, _tallied(step, step.stream(params, session, inputs), kept))
    prediction.join()
    return kept


def _tallied(step: LLMStep[Any, Any, Any], results: Iterable[Any], kept: list[Any]) -> Iterator[Any]:
    """The results passed on, what the end line says of each (step.done's `of`) kept as they pass."""
    for result in results:
        if step.done is not None:
            kept.append(step.done.of(result))
        yield result


def _said_once(stage: str, stopped: JudgeloopError | None, raised: BaseException | None) -> None:
    """The dry run's error, unless the run raised it again (its error is printed then, in full)."""
    if stopped is not None and (raised is None or stopped.message not in str(raised)):
        click.echo(f"{stage}: the dry run had stopped: {stopped.message}", err=True)


def without_httpx_cli() -> None:
    """httpx imports its command-line client as it is imported, and with it rich and pygments where
    they are installed (DVC installs them): about 25 ms of CPU before each LLM stage's first request
    (bench/stage_head.py). No stage runs that client: marked absent (Python's own way to stop an
    import), httpx defines the stub it defines without them. The HTTP client is the same. Done as an
    LLM stage starts, not on import: only the stage's own process is told."""
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]


# Libraries a stage imports after this module, by what it runs (an LLM stage's HTTP client and local
# cache, the report's templates), which a warm process (stages/zygote.py) imports before it forks.
# Libraries only, never the project's own code: a stage imports its code itself, in its own process,
# so that it runs the code DVC hashed for it.
LIBRARIES = ("httpx", "diskcache", "jinja2")


def preload() -> None:
    """LIBRARIES imported as a stage imports them (httpx without its command-line client). One that
    fails to import is left to the stage that needs it, which then fails as a cold one would."""
    without_httpx_cli()
    for name in LIBRARIES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def run_llm_step(
    design: Design[Any], stage: Stage, step: LLMStep[Any, Any, Any], params: EngineSettings
) -> None:
    from pipeline.llm.progress import StageProgress
    from pipeline.llm.stage import recorded_session  # only a stage that calls a model imports the engine

    without_httpx_cli()
    began = time.monotonic()
    inputs = step.inputs(params, FileUpstream(design, params))
    path = design.results_path(stage.name, params)
    with recorded_session(params, stage.name) as session:
        progress = StageProgress(stage.name, None, mode=session.mode, started=began)
        session.observe_served(progress.call)  # reads no record: adopted calls are served without one
        # The dry run writes its results beside the output only where they may be adopted (adopt).
        staged = StagedResults(step, path) if session.mode in ("auto", "replay") else None
        prediction = Prediction(stage, step, params, session, inputs, progress, staged)
        try:
            kept = step_results(step, params, session, inputs, prediction, path, staged)
        except BaseException as exc:
            prediction.ended.wait()  # its start line before the end line; its own error is this one's
            progress.finish(failed=True)
            _said_once(stage.name, prediction.stopped, exc)
            raise
        finally:
            if staged is not None:
                prediction.ended.wait()  # the dry run is done writing it
                staged.discard()
    _said_once(stage.name, prediction.stopped, None)
    progress.finish(step.done.said(kept) if step.done is not None else None)


def run_stage(design_name: str, stage_name: str) -> None:
    # A `.judgeloop` committed to git as a link (or holding one) would send the cache and memos where
    # whoever committed it chose: refused here as `judgeloop repro`/`exp` refuse it, for a plain
    # `dvc repro`, which has no other hook (a look at the folder's entries unless it holds a link).
    refuse_committed_link(Path("."))
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
