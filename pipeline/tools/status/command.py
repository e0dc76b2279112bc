"""`judgeloop status`: before running, which calls the next `dvc repro` needs and how many are new.

    judgeloop status            the stages DVC would run, from `dvc status`
    judgeloop status --all      every stage, as `dvc repro --force` would run them
    judgeloop status --json     the same, machine-readable

How it predicts. DVC's own status (dvc.repo.Repo.status) says which stages are out of date; with
no DVC project (or --all) every stage counts as out of date. The LLM stages that will run are then
run in-process, design by design (pipeline.experiments.registry) and stage by stage, each its
design's own LLMStep (the one the stage runner runs: pipeline.experiments.steps), with no model:
pipeline.tools.status.probe answers every call from the local cache and the recordings, and counts
the rest. A stage's results feed the later stages of its design; a stage DVC skips is read from its
output file. Only the stages of the project's dvc.yaml are shown (with no DVC project, the default
experiment's). A stage whose new output is byte-identical to the file on disk does not make its
downstream stages run, as in DVC; one whose output changes does. Keys use the model identity the
next run computes (the backend is asked for it: the GGUF hash for embedded, /api/tags for Ollama);
in replay mode, with --offline, or when the backend cannot be reached, it comes from llm.digest or
the recordings (for embedded, with the runner settings of params.yaml, which are part of its digest).
It is looked up when a stage is first dry-run: when DVC finds every stage up to date, status asks
no backend and reads no recording (with --offline, finding it reads every stage's recording, which
grows with the run: issue 33), and shows "not looked up".

When the count is exact. A call that is not recorded but whose request is fully known is a
certain model call. After it, the item goes on with a placeholder reply: calls that do not depend
on that reply (the other metrics' judge calls) are still looked up and counted; the first call
that does (a re-ask, the judge call on a regenerated assessment, the next regeneration) stops the
item, which makes the stage's count a lower bound ("at least N"). An item whose output holds an
unknown reply cannot be fed to the next stage: that stage's count is then a lower bound too, for
the items left out. So the prediction is exact when every new call is the last one its item makes
whatever the model answers (e.g. the last permitted attempt of a judge call in the last
iteration); "0 model calls, exact" means an offline replay will succeed. In refresh or off mode
every call goes to the model, and the count assumes the model answers as recorded.
"""

from __future__ import annotations

import functools
import json
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import click

from pipeline.errors import BackendError, ConfigError, JudgeloopError
from pipeline.experiments.design import Design
from pipeline.experiments.params import Params, load_params
from pipeline.experiments.registry import DEFAULT as DEFAULT_DESIGN
from pipeline.experiments.registry import designs, load_design
from pipeline.experiments.steps import LLMStep, Output
from pipeline.llm.key_table import KeyTable
from pipeline.llm.recordings.store import missing_here
from pipeline.llm.recordings.verified_memo import VerifiedMemo
from pipeline.llm.session import LLMSession, RecordingIndex, resolve_identity
from pipeline.llm.terminal import echo
from pipeline.llm.types import Backend, ModelIdentity
from pipeline.tools.design_targets import check_design
from pipeline.tools.status.dry_results import KEPT, DryResults, KnownResults, staged_work
from pipeline.tools.status.dvc_files import stages_and_status
from pipeline.tools.status.dvc_hashes import one_hash_per_path
from pipeline.tools.status.prediction import Prediction, StageStatus
from pipeline.tools.status.probe import probe_stage

T = TypeVar("T")


def _describe(changes: Any) -> str:
    parts = []
    for entry in changes if isinstance(changes, list) else [changes]:
        if not isinstance(entry, dict):
            parts.append(str(entry))
            continue
        for kind, paths in entry.items():
            if isinstance(paths, dict):
                named = [f"{p} ({', '.join(v)})" if isinstance(v, dict) else str(p) for p, v in paths.items()]
                parts.append(f"{kind}: {', '.join(named)}")
            else:
                parts.append(f"{kind}: {paths}")
    return "; ".join(parts) or "out of date"


@dataclass
class DvcView:
    """What DVC says of the project: which stages are out of date (None: it cannot say, and why),
    and which stages each stage reads the outputs of (its stage graph, so a new design's stages
    are seen without code here knowing them)."""

    changed: dict[str, str] | None
    how: str
    upstream: dict[str, tuple[str, ...]] = field(default_factory=dict)


def dvc_view() -> DvcView:
    try:
        from dvc.exceptions import DvcException, NotDvcRepoError
        from dvc.repo import Repo, lock_repo
    except ImportError:
        return DvcView(None, "DVC is not installed")
    try:
        # Under one lock, the graph and the status share one index: Repo.status, locked on its own,
        # drops the index and collects it again (the whole workspace walked twice: issue 33). A
        # folder several stages name is hashed once (pipeline.tools.status.dvc_hashes), and the stages
        # are read from dvc.yaml without a walk of the workspace where git shows no other stage
        # file (pipeline.tools.status.dvc_files).
        with Repo(".") as repo, lock_repo(repo), one_hash_per_path():
            graph, status = stages_and_status(repo)
            upstream = {
                str(stage.addressing): tuple(str(s.addressing) for s in graph.successors(stage))
                for stage in graph.nodes
            }
    except NotDvcRepoError:
        return DvcView(None, "not a DVC project")
    except DvcException as exc:
        return DvcView(None, f"dvc status failed: {exc}")
    changed = {str(name).rsplit(":", 1)[-1]: _describe(c) for name, c in status.items()}
    return DvcView(changed, "dvc status", upstream)


def _no_backend() -> Backend:
    raise AssertionError("replay mode resolves the identity without a backend")


def recorded_identity(params: Params, index: RecordingIndex) -> ModelIdentity:
    """The identity a replay uses; for embedded, the recorded GGUF hash with today's runner settings."""
    replay = params.model_copy(update={"cache": params.cache.model_copy(update={"mode": "replay"})})
    llm = params.llm
    files = {i.digest.split(";")[0] for i in index.identities("embedded", llm.model)}
    if llm.backend != "embedded" or llm.digest or len(files) != 1:
        return resolve_identity(replay, index, _no_backend)
    # EmbeddedBackend.identity()'s layout: of it, only the file hash is knowledge the records add.
    runner = llm.embedded
    digest = (
        f"{files.pop()};n_ctx={llm.options.num_ctx};n_threads={runner.n_threads};n_batch={runner.n_batch}"
    )
    return ModelIdentity(backend="embedded", name=llm.model, digest=digest)


def next_identity(params: Params, index: RecordingIndex, offline: bool) -> tuple[ModelIdentity, str]:
    if params.cache.mode == "replay":
        return resolve_identity(params, index, _no_backend), "llm.digest or the recordings, as replay mode"
    why = "--offline"
    if not offline:
        from pipeline.llm.backends import make_backend  # a backend may pull in heavy imports

        try:
            backend = make_backend(params.llm, Path(params.cache.dir))
            try:
                return backend.identity(), "asked the backend, as the next run will"
            finally:
                backend.close()
        except (BackendError, ConfigError) as exc:
            why = f"the backend could not say: {exc.message}"
    try:
        return recorded_identity(params, index), f"llm.digest or the recordings ({why})"
    except ConfigError as exc:
        # Auto mode: say what the backend said, not the replay-mode wording of the fallback.
        llm, said = params.llm, why.removeprefix("the backend could not say: ")
        raise ConfigError(
            f"cannot tell which model the next run will use: {said}; "
            f"and no recorded call names {llm.backend} model '{llm.model}' either. Fix: start the server "
            "(or correct llm.model / llm.backend in params.yaml); the next run asks it."
        ) from exc


def _results_folder() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="judgeloop-status-")


class StageAbsent(Exception):
    """The project's dvc.yaml has no such stage: its design is not part of this project."""


class Planner:
    """One prediction in progress, design by design (dry_run): which stages run, and each running
    LLM stage dry-run in turn, its known results fed to the next."""

    def __init__(
        self,
        params: Params,
        view: DvcView,
        every_stage: bool,
        identity: Callable[[], ModelIdentity],
        index: RecordingIndex,
    ) -> None:
        self.params, self.view, self.every_stage = params, view, every_stage
        self.identity, self.index = identity, index  # identity: the current design's, found when first asked
        self.statuses: dict[str, StageStatus] = {}
        self.counted = KeyTable()  # each planned call's key, 16 bytes of it (issue 33)
        self.moved: dict[str, bool] = {}  # stage -> its output will change
        self.unknown: dict[str, set[str]] = {}  # stage -> items whose new output is not known
        self._design: list[str] = []  # the current design's stages dry-run so far
        self.last: StageStatus | None = None  # the stage the dry run is at
        # Each dry-run stage's results, written as they come (dry_results), until the prediction ends.
        self._folder = _results_folder()

    def close(self) -> None:
        self._folder.cleanup()

    def design(self) -> None:
        """The next stages belong to another design (with no stage graph, only a design's own
        earlier stages count as upstream)."""
        self._design, self.last = [], None
        self.close()  # an earlier design's results are read no more
        self._folder = _results_folder()

    def will_run(self, stage: str) -> StageStatus:
        changed = self.view.changed
        if self.view.upstream and stage not in self.view.upstream:
            raise StageAbsent(stage)
        if changed is None:
            status = StageStatus(stage, True, "--all" if self.every_stage else "assumed out of date")
        elif stage in changed:
            status = StageStatus(stage, True, changed[stage])
        elif upstream := [u for u in self.view.upstream.get(stage, ()) if self.moved.get(u)]:
            status = StageStatus(stage, True, f"the output of {', '.join(upstream)} changes")
        else:
            status = StageStatus(stage, False, "up to date")
        self.statuses[stage] = status
        self.last = status
        return status

    def run(
        self,
        status: StageStatus,
        work: Callable[[LLMSession], Iterable[T]],
        items: list[str],
        path: Path,
        output: Output[T],
        decides_on_unknown: bool = False,
    ) -> KnownResults[T] | None:
        """Dry-run a stage that runs; its results the next stage can be fed. decides_on_unknown: the
        step takes a decision on a reply without sending it back (LLMStep.decides_on_unknown)."""
        upstream = self.view.upstream.get(status.stage, tuple(self._design))
        left_out = _union([self.unknown.get(u, set()) for u in upstream])
        results = DryResults(output, Path(self._folder.name) / f"{len(self.statuses)}-{path.name}")
        probe = probe_stage(
            status.stage,
            staged_work(work, results),
            items,
            KEPT,
            identity=self.identity(),
            index=self.index,
            cache_dir=Path(self.params.cache.dir),
            counted=self.counted,
        )
        # A decision taken on a placeholder reply may differ from the real one (pipeline.tools.status.probe).
        blind = decides_on_unknown and bool(probe.unknown_output)
        status.probe, status.left_out = probe, sorted(left_out)
        status.exact = not probe.stopped and not left_out and not blind
        self.unknown[status.stage] = _union([set(probe.stopped), set(probe.unknown_output), left_out])
        self.moved[status.stage] = bool(self.unknown[status.stage]) or results.differs_from(path)
        self._design.append(status.stage)
        known = results.known()
        # What the prediction shows is counted and listed by now; a stage's results themselves (an
        # item and a flag each) would be held to its end, every stage's (issue 33).
        probe.results, probe.known = [], []
        return known


def _union(sets: list[set[str]]) -> set[str]:
    """The items of all `sets`: the largest of them where it holds the others (none is changed once
    made), so that a stage whose unknown items are its upstream's shares their set, not a copy of a
    set of every item (issue 33: the first round of a design, where every item's output is unknown)."""
    largest = max(sets, key=len, default=set())
    return largest if all(part <= largest for part in sets) else set().union(*sets)


class PlannedUpstream:
    """An earlier stage's results: those its dry run found, if it runs; else its output file."""

    def __init__(self, design: Design[Any], params: Params) -> None:
        self.design, self.params = design, params
        self.known: dict[str, KnownResults[Any]] = {}

    def __call__(self, stage: str, output: Output[T]) -> list[T]:
        if stage in self.known:
            return self.known[stage].whole()
        if output.read is None:
            raise TypeError(f"stage {stage}'s results are not read back (its Output has no read)")
        return output.read(self.design.results_path(stage, self.params))

    def file(self, stage: str, output: Output[T]) -> Iterable[T]:
        """The results read again an item at a time (steps.results_of), as the stage runner's
        upstream reads them (stages.runner.FileUpstream), where the Output can."""
        if stage in self.known:
            return self.known[stage].file()
        if output.file is None:
            return self(stage, output)
        return output.file(self.design.results_path(stage, self.params))


def _work(step: LLMStep[Any, Any, T], params: Params, inputs: Any) -> Callable[[LLMSession], Iterable[T]]:
    return lambda session: step.stream(params, session, inputs)


def dry_run(design: Design[Any], plan: Planner) -> None:
    """A design's stages in order: which run, and each running LLM stage dry-run (the stages that
    call no model are only said to run or not)."""
    params = design.load_params()
    upstream = PlannedUpstream(design, params)
    for stage in design.stages:
        status = plan.will_run(stage.name)
        step = stage.load() if status.runs else None
        if not isinstance(step, LLMStep):
            continue
        inputs = step.inputs(params, upstream)
        known = plan.run(
            status,
            _work(step, params, inputs),
            step.items(inputs),
            design.results_path(stage.name, params),
            step.output,
            step.decides_on_unknown(params),
        )
        # Let go of the stage's inputs (its index of the interviews, say) before the next stage
        # makes its own: not two held at once (issue 33).
        del inputs
        if known is not None:
            upstream.known[stage.name] = known


class IdentityUnknown(Exception):
    """The model's identity cannot be found: the whole status fails, not one stage's prediction."""

    def __init__(self, error: JudgeloopError) -> None:
        super().__init__(error.message)
        self.error = error


NOT_LOOKED_UP = "not looked up: no LLM stage runs"


class Identities:
    """The model identities a prediction keys calls with, each found when a stage first needs it
    (issue 33): when DVC finds every stage up to date, none is dry-run and nothing is looked up,
    where finding it asks the backend or, with --offline, reads every stage's recording, which
    grows with the run. known: the identity and its source, when the caller knows it."""

    def __init__(
        self, params: Params, index: RecordingIndex, offline: bool, known: tuple[ModelIdentity, str] | None
    ) -> None:
        self.params, self.index, self.offline = params, index, offline
        self._found: dict[str, tuple[ModelIdentity, str]] = {} if known is None else {"": known}

    def _find(self, name: str, params: Params) -> tuple[ModelIdentity, str]:
        if name not in self._found:
            try:
                self._found[name] = next_identity(params, self.index, self.offline)
            except JudgeloopError as exc:
                raise IdentityUnknown(exc) from exc
        return self._found[name]

    def default(self) -> tuple[ModelIdentity, str]:
        """params.yaml's model's identity, and where it came from."""
        return self._find("", self.params)

    def of(self, design: Design[Any]) -> ModelIdentity:
        """A design's model's identity: its own, where its llm_overrides entry changes the llm."""
        own = design.load_params().llm
        if own == self.params.llm:
            return self.default()[0]
        return self._find(design.name, self.params.model_copy(update={"llm": own}))[0]


def _dry_run_design(plan: Planner, design: Design[Any], identity: Callable[[], ModelIdentity]) -> None:
    plan.design()
    plan.identity = identity
    try:
        dry_run(design, plan)
    except StageAbsent:
        return
    except IdentityUnknown as exc:
        raise exc.error from None
    except JudgeloopError as exc:  # an input the stage would fail on too: say so, go on
        if plan.last is None:
            raise
        plan.last.why += f" (its calls cannot be predicted: {exc.message})"
        plan.last.exact = False


def predict(
    params: Params,
    *,
    every_stage: bool = False,
    offline: bool = False,
    known: tuple[ModelIdentity, str] | None = None,
    only: str | None = None,
) -> Prediction:
    """known: the model's identity, and where it came from, when the caller knows it (a batch round).
    only: one design's stages (`--design`). A design with its own llm (llm_overrides) is dry-run
    under its own model's identity."""
    cache_dir = Path(params.cache.dir)
    # The memo of recordings verified in full, as a session keeps it, read but not written (status
    # writes nothing): a status after a run scans the recordings for their keys, not verifying again.
    memo = VerifiedMemo.beside(cache_dir, writes=False)
    # One stage's recording held at a time, each stage dry-run in turn (issue 33: 1.8 GB at 30k calls).
    index = RecordingIndex(Path(params.cache.recordings), memo=memo, hold_one=True)
    identities = Identities(params, index, offline, known)
    view = dvc_view()
    if every_stage:  # every stage runs; the graph still says which feeds which
        view = DvcView(None, "--all", view.upstream)
    plan = Planner(params, view, every_stage, lambda: identities.default()[0], index)
    # With no stage graph (no DVC project), the default experiment's stages only.
    chosen = designs() if view.upstream else [load_design(DEFAULT_DESIGN)]
    try:
        for design in [load_design(only)] if only else chosen:
            _dry_run_design(plan, design, functools.partial(identities.of, design))
    finally:
        plan.close()
    # The stages no design dry-runs (the aggregates, which call no model): whether DVC runs them.
    own = {s.name for s in load_design(only).stages} if only else None
    for stage in sorted((set(view.upstream) | set(view.changed or {})) - set(plan.statuses)):
        if own is None or stage in own:
            plan.will_run(stage)
    stages_from = view.how if view.changed is not None or every_stage else f"every stage ({view.how})"
    statuses = list(plan.statuses.values())
    identity, source = _shown_identity(identities, only, known is not None or any(s.probe for s in statuses))
    return Prediction(identity, source, params.cache.mode, stages_from, statuses)


def _shown_identity(
    identities: Identities, only: str | None, looked_up: bool
) -> tuple[ModelIdentity | None, str]:
    """The identity the prediction shows: none where no stage was dry-run (none was looked up)."""
    if not looked_up:
        return None, NOT_LOOKED_UP
    try:
        source = identities.default()[1]
        return (identities.of(load_design(only)) if only else identities.default()[0]), source
    except IdentityUnknown as exc:
        raise exc.error from None


@click.command()
@click.option("--all", "every_stage", is_flag=True, help="Every stage, not only those DVC finds out of date.")
@click.option(
    "--offline", is_flag=True, help="Do not ask the backend for the model's identity; use the recorded one."
)
@click.option("--json", "json_out", is_flag=True, help="One JSON object instead of text.")
@click.option("-v", "--verbose", is_flag=True, help="List every new call.")
@click.option("--design", "only", metavar="NAME", help="Only this design's stages.")
def status(every_stage: bool, offline: bool, json_out: bool, verbose: bool, only: str | None) -> None:
    """Which calls the next `dvc repro` needs, how many are recorded, how many go to the model.

    \b
    Examples:
      judgeloop status                 the stages DVC would run now
      judgeloop status --all -v        every stage, as `judgeloop repro --replay` runs them, each new call
      judgeloop status --json
      judgeloop status --design paper   one design's stages

    Nothing is written and no model is called: the stages DVC would run are dry-run against the
    local cache and the recordings (see `pipeline/tools/status/command.py` for when the count is exact).
    """
    from pipeline.tools.status.report import as_json, render_text

    if only is not None:
        check_design(only)
    params = load_params()
    not_here = missing_here(Path(params.cache.recordings))
    if not_here is not None:  # said first: every count below is without them
        click.echo(f"status: {not_here}", err=True)
    prediction = predict(params, every_stage=every_stage, offline=offline, only=only)
    if json_out:
        click.echo(json.dumps(as_json(prediction), indent=1, sort_keys=True))
    else:
        echo(render_text(prediction, verbose), nl=False)
