"""A prediction's plan for `judgeloop status` (pipeline.tools.status.command): which of a design's
stages run, and each running LLM stage dry-run in turn (pipeline.tools.status.probe), its known
results fed to the next."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from pipeline.experiments.design import Design
from pipeline.experiments.params import Params
from pipeline.experiments.steps import LLMStep, Output
from pipeline.llm.key_table import KeyTable
from pipeline.llm.session import LLMSession, RecordingIndex
from pipeline.llm.types import ModelIdentity
from pipeline.tools.status.dry_results import KEPT, DryResults, KnownResults, staged_work
from pipeline.tools.status.dvc_state import DvcView
from pipeline.tools.status.prediction import StageStatus
from pipeline.tools.status.probe import probe_stage

__all__ = ["PlannedUpstream", "Planner", "StageAbsent", "dry_run"]

T = TypeVar("T")


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
