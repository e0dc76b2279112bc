"""`judgeloop audit`: the exact calls an experiment made, read back from its recordings.

    judgeloop audit --item 901 --iteration 1 --metric completeness
    judgeloop audit --stage judge --search "score: 2" --format markdown
    judgeloop audit diff 901 --from 0 --to 1 --metric completeness

Only files are read (recordings/<stage>/, and runs/<stage>.json for --hit/--miss): no model, no
network, and the backend that made the calls does not matter. Every request message is printed as
it was sent, the reply as it came back, and for a judge call the score its stage read from it (the
reading its design owns, Design.reads, with the metric and the settings of params.yaml), so what a
reader sees is what the numbers were computed from. A record that fails verification is still
shown, marked untrusted; so is every call of a recordings folder that no stage of dvc.yaml owns and
no judgeloop run here wrote (a judge-evaluate stage): nothing pins such a folder, anyone with write
access could have put it there (pipeline.llm.recordings.owners). Control
characters in a reply (a terminal escape that would clear the screen or fake a line) are shown
escaped in the text and markdown formats (pipeline.tools.audit.escape); `--raw` prints them as
recorded, and `--format jsonl` is JSON.
"""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.errors import JudgeloopError
from pipeline.experiments.params import Params, load_params
from pipeline.llm.recordings import stage_folders
from pipeline.llm.settings import params_path
from pipeline.llm.terminal import guarded
from pipeline.tools.audit.calls import Marks, iter_calls, load_calls, unowned_folders
from pipeline.tools.audit.diff import diff_iterations
from pipeline.tools.audit.escape import escape_controls
from pipeline.tools.audit.filters import Selection, select, why_nothing
from pipeline.tools.audit.formats import Format, readers, render
from pipeline.tools.inventory import RunSummary, read_runs


def _parse_labels(labels: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    parsed = []
    for label in labels:
        name, sep, value = label.partition("=")
        if not sep or not name:
            raise click.BadParameter(
                f"'{label}' is not NAME=VALUE (e.g. --label prompt=full)", param_hint="--label"
            )
        parsed.append((name, value))
    return tuple(parsed)


@click.group(invoke_without_command=True)
@click.option("--stage", "stages", multiple=True, help="Only this stage's calls (repeatable).")
@click.option("--item", "items", multiple=True, help="Only this item (repeatable).")
@click.option(
    "--key",
    "keys",
    multiple=True,
    help="Only the call of this key (repeatable), as audit and the report show it: read from the one "
    "shard of its stage's recording that holds it.",
)
@click.option("--iteration", type=int, help="Only this refinement iteration (0: the first assessment).")
@click.option("--metric", help="Only judge calls for this metric.")
@click.option("--role", help="Only calls of this role: assess, judge or refine.")
@click.option("--model", help="Only calls whose model name or digest contains this.")
@click.option(
    "--hit/--miss",
    "hit",
    default=None,
    help="Only calls the stage's last run found cached / sent to the model.",
)
@click.option("--search", help="Only calls whose prompt or reply contains this text (any case).")
@click.option(
    "--label",
    "labels",
    multiple=True,
    metavar="NAME=VALUE",
    help="Only calls whose context has this label, any design's (e.g. prompt=full; repeatable).",
)
@click.option("--limit", type=click.IntRange(min=0), help="At most this many calls.")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "jsonl", "markdown"]), default="text", show_default=True
)
@click.option(
    "--recordings",
    "recordings_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Read these recordings (default: cache.recordings).",
)
@click.option(
    "--raw",
    is_flag=True,
    help="Print control characters in prompts and replies as recorded (default: shown escaped, \\x1b).",
)
@click.pass_context
def audit(
    ctx: click.Context,
    stages: tuple[str, ...],
    items: tuple[str, ...],
    keys: tuple[str, ...],
    iteration: int | None,
    metric: str | None,
    role: str | None,
    model: str | None,
    hit: bool | None,
    search: str | None,
    labels: tuple[str, ...],
    limit: int | None,
    fmt: Format,
    recordings_dir: Path | None,
    raw: bool,
) -> None:
    """Show recorded calls: the exact request messages, the reply, and the score read from it.

    Filters combine; one that matches nothing is an error listing the values recorded for it.

    \b
    Examples:
      judgeloop audit --item 903 --iteration 1 --metric accuracy   one judge call, exact prompt and reply
      judgeloop audit --key jl2:71a50084cd0f161f8c7da8e6c5b99385   one call by its key, read from its shard
      judgeloop audit --stage assess --search hopeless --format markdown
      judgeloop audit --stage rag_judge --item d02 --limit 1
      judgeloop audit --item 999                  lists the items there are
      judgeloop audit diff 903 --from 0 --to 2 --metric completeness
    """
    # A recordings folder named outright can be audited anywhere (a colleague's, an unpacked copy):
    # without the project's params.yaml there are no last-run statistics, and that is all it loses.
    params: Params | None
    if recordings_dir is None:
        params = load_params()
        ctx.obj = Path(params.cache.recordings)
    else:
        params = load_params() if params_path().is_file() else None
        ctx.obj = recordings_dir
    if ctx.invoked_subcommand is not None:
        return
    runs = read_runs(params) if params else {}
    marks = Marks()
    untrusted = unowned_folders(ctx.obj, runs)
    if hit is not None:
        seen = stages or tuple(sorted(d.name for d in stage_folders.stage_dirs(ctx.obj)))
        without = [s for s in seen if s not in runs]
        if len(without) == len(seen):
            raise JudgeloopError(
                "--hit/--miss needs the last run's statistics (runs/<stage>.json), and there are none for "
                f"{', '.join(seen) or 'any stage'} on this machine: they are written by a stage run here, "
                "not recorded. Fix: run the stage (dvc repro), or drop --hit/--miss."
            )
        if without:
            click.echo(
                f"note: no last-run statistics for {', '.join(without)}: its calls are left out", err=True
            )
    sel = Selection(
        stages,
        items,
        iteration,
        metric,
        role,
        model,
        None if hit is None else ("hit" if hit else "miss"),
        search,
        _parse_labels(labels),
        keys,
    )
    chosen = select(iter_calls(ctx.obj, stages, untrusted, marks, items, keys), sel, runs)
    if limit is not None:
        chosen = chosen[:limit]
    if not chosen:
        raise JudgeloopError(_why_none(ctx.obj, sel, runs))
    shown = render(chosen, fmt, runs, marks, readers(params), raw)
    # color=True: click would strip escape sequences from --raw output that is not a terminal.
    # Each text was shown as itself where it was written (formats.py); `guarded` is the net under it.
    click.echo(shown if raw or fmt == "jsonl" else guarded(shown), nl=False, color=raw or None)


def _why_none(root: Path, sel: Selection, runs: dict[str, RunSummary]) -> str:
    """Why no call was chosen: read again (whole, or the keys' calls alone), only to list the values
    that do exist."""
    if not sel.keys:
        return why_nothing(load_calls(root, sel.stages), sel, runs)
    found = list(iter_calls(root, sel.stages, keys=sel.keys))
    if found:
        return why_nothing(found, sel, runs)
    where = f"stage {', '.join(sel.stages)}" if sel.stages else "any stage"
    return (
        f"no recorded call has key {', '.join(sel.keys)} in {where} under {root}/. Fix: copy the key "
        "as audit or the report shows it (jl2: and 32 hex digits), or drop --stage."
    )


@audit.command()
@click.argument("item")
@click.option(
    "--from", "first", type=int, required=True, help="The earlier iteration (0: the first assessment)."
)
@click.option("--to", "second", type=int, required=True, help="The later iteration.")
@click.option("--metric", help="Also diff this metric's judge prompt and reply.")
@click.option(
    "-U",
    "--context",
    "context",
    type=click.IntRange(min=0),
    default=3,
    show_default=True,
    help="Lines of context.",
)
@click.option("--raw", is_flag=True, help="Print control characters as recorded (default: escaped).")
@click.pass_obj
def diff(root: Path, item: str, first: int, second: int, metric: str | None, context: int, raw: bool) -> None:
    """Unified diffs of what changed between two iterations of ITEM: the assessment prompt and reply,
    and with --metric the judge prompt and reply for that metric."""
    calls = list(iter_calls(root, items=(item,)))  # the item's alone
    shown = diff_iterations(calls, item, first, second, metric, context)
    click.echo(shown if raw else escape_controls(shown), nl=False, color=raw or None)
