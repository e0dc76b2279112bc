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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from pipeline.errors import JudgeloopError
from pipeline.experiments.design import Design
from pipeline.experiments.params import Params, load_params
from pipeline.experiments.registry import DEFAULT as DEFAULT_DESIGN
from pipeline.experiments.registry import designs, load_design
from pipeline.llm.recordings.store import missing_here
from pipeline.llm.recordings.verified_memo import VerifiedMemo
from pipeline.llm.session import RecordingIndex
from pipeline.llm.terminal import echo
from pipeline.llm.types import ModelIdentity
from pipeline.tools.design_targets import check_design
from pipeline.tools.local_state import say_committed
from pipeline.tools.status.dvc_state import DvcView, dvc_view
from pipeline.tools.status.identities import Identities, IdentityUnknown
from pipeline.tools.status.planner import Planner, StageAbsent, dry_run
from pipeline.tools.status.prediction import Prediction

NOT_LOOKED_UP = "not looked up: no LLM stage runs"


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
    say_committed(Path("."))
    params = load_params()
    not_here = missing_here(Path(params.cache.recordings))
    if not_here is not None:  # said first: every count below is without them
        click.echo(f"status: {not_here}", err=True)
    prediction = predict(params, every_stage=every_stage, offline=offline, only=only)
    if json_out:
        click.echo(json.dumps(as_json(prediction), indent=1, sort_keys=True))
    else:
        echo(render_text(prediction, verbose), nl=False)
