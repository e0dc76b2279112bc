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

import re
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

import click

from pipeline.errors import JudgeloopError
from pipeline.experiments.design import load_ref
from pipeline.experiments.params import Params, load_params
from pipeline.experiments.registry import designs
from pipeline.judges.call_reading import CallReader, CallReading
from pipeline.llm.keys import canonical_json
from pipeline.llm.recordings import key_reader, stage_folders, stage_reader
from pipeline.llm.recordings.item_table import tabled_items
from pipeline.llm.recordings.owners import recording_owners
from pipeline.llm.recordings.stage_index import read_items
from pipeline.llm.recordings.stage_reader import LoadedCall
from pipeline.llm.recordings.store import missing_here
from pipeline.llm.records import RecordedCall
from pipeline.llm.settings import params_path
from pipeline.llm.terminal import framed, shown
from pipeline.tools.audit.diff import diff_iterations
from pipeline.tools.audit.escape import escape_controls
from pipeline.tools.audit.filters import Selection, last_run_status, select, why_nothing
from pipeline.tools.inventory import RunSummary, read_runs

Format = Literal["text", "jsonl", "markdown"]
# stage name -> its design's reader: (call context, call record) -> the reading its stage made, or None
Readers = dict[str, CallReader]


class Marks(dict[int, str]):
    """Why a call is not to be trusted beyond its own record, by id() of the call iter_calls made.
    Each marked call is held here too, so that its id() is never reused by a later call while the
    marks live (iter_calls streams, and the calls a filter drops are freed)."""

    def __init__(self) -> None:
        super().__init__()
        self._held: list[RecordedCall] = []

    def mark(self, call: RecordedCall, why: str) -> None:
        self[id(call)] = why
        self._held.append(call)


def iter_calls(
    root: Path,
    stages: Iterable[str] = (),
    untrusted: dict[str, str] | None = None,
    marks: Marks | None = None,
    items: Collection[str] = (),
    keys: Collection[str] = (),
) -> Iterator[RecordedCall]:
    """The recorded calls of `stages` (or every stage), one at a time, each folder's in file order: a
    filter keeps what it shows, so auditing one call of a million holds one stage's recording in
    memory, not every call. The calls of a folder in `untrusted` are marked in `marks` with its reason.
    `items`: only these items' calls: in a sharded recording with tables of items, only their lines
    read (pipeline.llm.recordings.item_table); otherwise the others' lines scanned, not parsed.
    `keys`: only these keys' calls, each looked up where its key puts it (in a sharded recording,
    the one shard of calls that holds it and the block shards its line names: key_reader.read_keys),
    so that auditing one call of a million reads a sixteenth of its stage, not every line."""
    wanted = set(stages)
    found = {d.name: d for d in stage_folders.stage_dirs(root)}
    unknown = wanted - found.keys()
    not_here = missing_here(root, tuple(sorted(unknown))) if unknown or not found else None
    if not_here is not None:  # pinned in dvc.lock, not pulled (cache.recordings_store: dvc)
        raise JudgeloopError(not_here)
    if unknown:
        have = ", ".join(sorted(found)) or "none"
        raise JudgeloopError(
            f"no recordings for stage(s) {', '.join(sorted(unknown))} under {root}/ (recorded: {have}). "
            "Fix: run the stage (dvc repro), or point cache.recordings at the experiment's recordings."
        )
    for name, directory in sorted(found.items()):
        if not wanted or name in wanted:
            why = untrusted.get(name) if untrusted else None
            for loaded in _stage_calls(directory, items, keys):
                if marks is not None and why is not None:
                    marks.mark(loaded.call, why)
                yield loaded.call


def _stage_calls(directory: Path, items: Collection[str], keys: Collection[str]) -> Iterator[LoadedCall]:
    # verify=False: an edited record is exactly what an auditor wants to see; it is marked instead.
    if keys:
        return key_reader.read_keys(directory, keys, verify=False)
    if items:  # through the stage's tables of items where they can be used; else every line scanned
        tabled = tabled_items(directory, items)
        return iter(tabled) if tabled is not None else read_items(directory, items)
    return stage_reader.read_stage(directory, verify=False)


def load_calls(root: Path, stages: Iterable[str] = ()) -> list[RecordedCall]:
    return list(iter_calls(root, stages))


def unowned_folders(root: Path, runs: dict[str, RunSummary]) -> dict[str, str]:
    """Why each stage folder under `root` that no stage of ./dvc.yaml owns, and for which no run here
    left a summary (judge-evaluate's), is untrusted; none to say without a dvc.yaml here."""
    owners = recording_owners(Path("."), root)
    if owners is None:
        return {}
    owned = {path.name for path in owners}
    return {
        d.name: f"{d} is owned by no stage of dvc.yaml and no judgeloop run here wrote it (not pinned)"
        for d in stage_folders.stage_dirs(root)
        if d.name not in owned and d.name not in runs
    }


def readers(params: Params | None) -> Readers:
    """Each design's reader (Design.reads) for the stages of that design, bound to params.yaml's
    settings (None: the designs' defaults)."""
    found: Readers = {}
    for design in designs():
        if design.reads is not None:
            read = load_ref(design.reads)(params)
            found.update((stage.name, read) for stage in design.stages)
    return found


def score_of(call: RecordedCall, read: Readers | None) -> CallReading | None:
    """The score the call's stage read from its reply, as its design reads it; None for a call that
    no design reads for a score."""
    reader = (read or {}).get(call.context.stage)
    return None if reader is None else reader(call.context, call.record)


def _options(call: RecordedCall) -> str:
    dumped = call.record.request.options.model_dump(mode="json")
    return " ".join(f"{k}={v}" for k, v in dumped.items() if k != "stop" or v)


def _header(
    call: RecordedCall, runs: dict[str, RunSummary], marks: Marks | None = None
) -> list[tuple[str, str]]:
    record, reply = call.record, call.record.reply
    rows = [
        ("key", record.key),
        ("model", f"{record.model.backend} {record.model.name} ({record.model.digest})"),
        ("created_at", record.created_at),
        ("tokens", f"prompt {reply.prompt_tokens}, completion {reply.completion_tokens}"),
        ("done_reason", str(reply.done_reason)),
        *([("refused", reply.too_long)] if reply.too_long is not None else []),
        ("options", _options(call)),
    ]
    if record.request.format is not None:
        rows.append(("format", canonical_json(record.request.format)))
    if call.context.stage in runs:
        rows.append(("last run", last_run_status(runs, call) or "not part of the last run"))
    problem = record.problem() or (marks.get(id(call)) if marks is not None else None)
    rows.append(("record", "verifies" if problem is None else f"UNTRUSTED: {problem}"))
    return rows


def _score_line(reading: CallReading) -> str:
    matched = f' from "{reading.matched}"' if reading.matched else ""
    # What the reply states even when it is no score ("Score: 3.5/5" on 1-5 is non_integer, states 3.5).
    stated = f", states {reading.stated}" if reading.score is None and reading.stated is not None else ""
    # A structured reply: the fields read, each with G-Eval's weighted score where it has one; a
    # failure: what was wrong.
    fields = [
        f"{name} {value}" + (f" (weighted {reading.weighted[name]})" if name in reading.weighted else "")
        for name, value in reading.fields.items()
    ]
    fields += [f"weighted {w}" for name, w in reading.weighted.items() if name not in reading.fields]
    read = f"; {', '.join(fields)}" if fields else ""
    error = f": {reading.error}" if reading.error else ""
    score = "none" if reading.score is None else reading.score
    return f"{score} ({reading.reason}{stated}{matched}{error}{read})"


def format_text(
    call: RecordedCall, runs: dict[str, RunSummary], marks: Marks | None = None, read: Readers | None = None
) -> str:
    lines = [f"=== {shown(call.context.describe(), one_line=True)} ==="]
    lines += [f"{name:<12}{shown(value, one_line=True)}" for name, value in _header(call, runs, marks)]
    # Each text behind a margin: no line of a prompt or reply can pass for a header (`===`, `---`).
    for number, message in enumerate(call.record.request.messages, start=1):
        lines += [f"--- message {number} ({message.role}) ---", framed(message.content)]
    lines += ["--- reply ---", framed(call.record.reply.text)]
    reading = score_of(call, read)
    if reading is not None:
        lines.append(f"--- score: {_score_line(reading)} ---")
    return "\n".join(lines) + "\n"


def as_json(
    call: RecordedCall, runs: dict[str, RunSummary], marks: Marks | None = None, read: Readers | None = None
) -> dict[str, Any]:
    record = call.record
    reading = score_of(call, read)
    return {
        "context": call.context.model_dump(mode="json"),
        "key": record.key,
        "model": record.model.model_dump(mode="json"),
        "created_at": record.created_at,
        "request": record.request.model_dump(mode="json"),
        "reply": record.reply.model_dump(mode="json"),
        "score": None if reading is None else reading.as_json(),
        "last_run": last_run_status(runs, call),
        "problem": record.problem() or (marks.get(id(call)) if marks is not None else None),
    }


def _fenced(text: str, info: str = "text") -> str:
    # A fence longer than any backtick run inside, so a reply that itself holds ``` stays one block.
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def format_markdown(
    call: RecordedCall, runs: dict[str, RunSummary], marks: Marks | None = None, read: Readers | None = None
) -> str:
    parts = [f"### {call.context.describe()}", "", "| | |", "|---|---|"]
    parts += [f"| {name} | `{value}` |" for name, value in _header(call, runs, marks)]
    for number, message in enumerate(call.record.request.messages, start=1):
        parts += ["", f"**message {number} ({message.role})**", "", _fenced(message.content)]
    parts += ["", "**reply**", "", _fenced(call.record.reply.text)]
    reading = score_of(call, read)
    if reading is not None:
        parts += ["", f"**score**: {_score_line(reading)}"]
    return "\n".join(parts) + "\n"


def render(
    calls: list[RecordedCall],
    fmt: Format,
    runs: dict[str, RunSummary],
    marks: Marks | None = None,
    read: Readers | None = None,
) -> str:
    if fmt == "jsonl":
        return "".join(canonical_json(as_json(c, runs, marks, read)) + "\n" for c in calls)
    one = format_markdown if fmt == "markdown" else format_text
    return "\n".join(one(c, runs, marks, read) for c in calls)


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
    shown = render(chosen, fmt, runs, marks, readers(params))
    # color=True: click would strip escape sequences from --raw output that is not a terminal.
    click.echo(shown if raw or fmt == "jsonl" else escape_controls(shown), nl=False, color=raw or None)


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
