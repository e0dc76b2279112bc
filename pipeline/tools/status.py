"""`judgeloop status`: before running, which calls the next `dvc repro` needs and how many are new.

    judgeloop status            the stages DVC would run, from `dvc status`
    judgeloop status --all      every stage, as `dvc repro --force` would run them
    judgeloop status --json     the same, machine-readable

How it predicts. DVC's own status (dvc.repo.Repo.status) says which stages are out of date; with
no DVC project (or --all) every stage counts as out of date. The LLM stages that will run are then
run in-process, in order, by the same functions the stages call (pipeline.experiments.paper's steps), with no
model: pipeline.tools.probe answers every call from the local cache and the recordings, and counts the
rest. A stage's results feed the next; a stage DVC skips is read from outputs/*.jsonl. A stage
whose new output is byte-identical to the file on disk does not make its downstream stages run,
as in DVC; one whose output changes does. Keys use the model identity the next run computes
(the backend is asked for it: the GGUF hash for embedded, /api/tags for Ollama); in replay mode,
with --offline, or when the backend cannot be reached, it comes from llm.digest or the recordings
(for embedded, with the runner settings of params.yaml, which are part of its digest).

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

import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import click

from pipeline.data.jsonl import Result, read_jsonl, write_jsonl
from pipeline.data.transcripts import load_transcripts
from pipeline.errors import BackendError, ConfigError
from pipeline.experiments.paper.assess import run_assess
from pipeline.experiments.paper.judge import run_judge
from pipeline.experiments.paper.refine import run_refine
from pipeline.experiments.params import Params, load_params
from pipeline.judges.rubric.results import Assessment, Judgement
from pipeline.llm.session import LLMSession, RecordingIndex, resolve_identity
from pipeline.llm.types import Backend, ModelIdentity
from pipeline.loops.results import Refinement
from pipeline.tools.prediction import Prediction, StageStatus
from pipeline.tools.probe import probe_stage

R = TypeVar("R", Assessment, Judgement, Refinement)


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
        from dvc.repo import Repo
    except ImportError:
        return DvcView(None, "DVC is not installed")
    try:
        with Repo(".") as repo:
            graph = repo.index.graph
            upstream = {
                str(stage.addressing): tuple(str(s.addressing) for s in graph.successors(stage))
                for stage in graph.nodes
            }
            status = repo.status()
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
    return recorded_identity(params, index), f"llm.digest or the recordings ({why})"


def _output_differs(path: Path, results: Sequence[Result]) -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        rendered = Path(tmp) / path.name
        write_jsonl(rendered, results)
        return not path.exists() or rendered.read_bytes() != path.read_bytes()


def predict(params: Params, *, every_stage: bool = False, offline: bool = False) -> Prediction:
    index = RecordingIndex(Path(params.cache.recordings))
    identity, source = next_identity(params, index, offline)
    view = DvcView(None, "--all") if every_stage else dvc_view()
    changed, how = view.changed, view.how
    llm_stages = {"assess", "judge", "refine"}
    # Only a run LLM stage can make another one run, so with none out of date the data is not needed.
    needed = changed is None or bool(llm_stages & changed.keys())
    transcripts = {t.item_id: t for t in load_transcripts(params.data)} if needed else {}
    counted: set[str] = set()
    moved: dict[str, bool] = {}  # stage -> its output will change
    unknown: dict[str, set[str]] = {}  # stage -> items whose new output is not known

    def will_run(stage: str) -> StageStatus:
        if changed is None:
            return StageStatus(stage, True, "--all" if every_stage else "assumed out of date")
        if stage in changed:
            return StageStatus(stage, True, changed[stage])
        upstream = [u for u in view.upstream.get(stage, ()) if moved.get(u)]
        if upstream:
            return StageStatus(stage, True, f"the output of {', '.join(upstream)} changes")
        return StageStatus(stage, False, "up to date")

    def run(
        status: StageStatus, work: Callable[[LLMSession], list[R]], items: list[str], out: str
    ) -> list[R]:
        # With no stage graph (--all, no DVC) every earlier stage counts as upstream.
        upstream = view.upstream.get(status.stage, tuple(unknown))
        left_out = set().union(*(unknown.get(u, set()) for u in upstream))
        probe = probe_stage(
            status.stage,
            work,
            items,
            identity=identity,
            index=index,
            cache_dir=Path(params.cache.dir),
            counted=counted,
        )
        # refine decides on an unscored placeholder without sending it back (see pipeline.tools.probe).
        blind = (
            status.stage == "refine" and not params.refine.unscored_triggers and bool(probe.unknown_output)
        )
        status.probe, status.left_out = probe, sorted(left_out)
        status.exact = not probe.stopped and not left_out and not blind
        unknown[status.stage] = set(probe.stopped) | set(probe.unknown_output) | left_out
        moved[status.stage] = bool(unknown[status.stage]) or _output_differs(Path(out), probe.results)
        return probe.known_results()

    assess = will_run("assess")
    if assess.runs:
        corpus = list(transcripts.values())
        assessments = run(
            assess, lambda s: run_assess(params, s, corpus), list(transcripts), params.assess.out
        )
    else:
        assessments = read_jsonl(Path(params.assess.out), Assessment)
    judge = will_run("judge")
    if judge.runs:
        judgements = run(
            judge,
            lambda s: run_judge(params, s, transcripts, assessments),
            [a.item for a in assessments],
            params.judge.out,
        )
    else:
        judgements = read_jsonl(Path(params.judge.out), Judgement)
    refine = will_run("refine")
    if refine.runs:
        known = {a.item: a for a in assessments}
        inputs = [j for j in judgements if j.item in known]
        run(
            refine,
            lambda s: run_refine(params, s, transcripts, known, inputs),
            [j.item for j in inputs],
            params.refine.out,
        )
    stages_from = how if changed is not None or every_stage else f"every stage ({how})"
    statuses = [assess, judge, refine, will_run("aggregate")]
    # Other designs' stages: DVC says whether they run; their calls are not dry-run here yet.
    probed = {s.stage for s in statuses}
    for stage in sorted((set(view.upstream) | set(changed or {})) - probed):
        other = will_run(stage)
        if other.runs:
            other.why += " (its calls are not predicted)"
            other.exact = False
        statuses.append(other)
    return Prediction(identity, source, params.cache.mode, stages_from, statuses)


@click.command()
@click.option("--all", "every_stage", is_flag=True, help="Every stage, not only those DVC finds out of date.")
@click.option(
    "--offline", is_flag=True, help="Do not ask the backend for the model's identity; use the recorded one."
)
@click.option("--json", "json_out", is_flag=True, help="One JSON object instead of text.")
@click.option("-v", "--verbose", is_flag=True, help="List every new call.")
def status(every_stage: bool, offline: bool, json_out: bool, verbose: bool) -> None:
    """Which calls the next `dvc repro` needs, how many are recorded, how many go to the model.

    Nothing is written and no model is called: the stages DVC would run are dry-run against the
    local cache and the recordings (see `pipeline/tools/status.py` for when the count is exact).
    """
    from pipeline.tools.status_report import as_json, render_text

    prediction = predict(load_params(), every_stage=every_stage, offline=offline)
    if json_out:
        click.echo(json.dumps(as_json(prediction), indent=1, sort_keys=True))
    else:
        click.echo(render_text(prediction, verbose), nl=False)
