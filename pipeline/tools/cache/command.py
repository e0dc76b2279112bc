"""`judgeloop cache`: look after the local call store and the recordings, from the records alone.

    stats    local store entries and bytes; recordings per stage; the last run of each stage
    verify   re-derive every key from its request, in the local store AND the recordings;
             --repair deletes the local entries that fail (damaged, edited, foreign, a pickle)
    gc       drop local entries that no recording and no last run references
    merge    take a collaborator's recordings; a key answered differently on each side is a conflict
    seed     copy recorded calls into the local store
    export   write the local store out as recordings (for a collaborator, or another clone)

Nothing here keeps books of its own: the local store is pipeline.llm.cache.store.CallStore, the
recordings are pipeline.llm.recordings (read by stage_reader, written by stage_writer), and "the
last run" is the runs/<stage>.json summary that LLMSession.close writes next to the cache directory
(all read through pipeline.tools.inventory; what verify holds the store against: recorded_sums).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click
from tqdm import tqdm

from pipeline.errors import CorruptRecordError, JudgeloopError, UnsafeNameError
from pipeline.experiments.params import Params, load_params
from pipeline.llm.cache.safe_disk import ForeignKey
from pipeline.llm.cache.store import CallStore
from pipeline.llm.files import safe_name
from pipeline.llm.keys import KEY_PREFIX
from pipeline.llm.recordings import stage_folders, stage_reader, stage_writer
from pipeline.llm.recordings.pins import Pins
from pipeline.llm.recordings.verified_memo import VerifiedMemo
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.terminal import echo
from pipeline.llm.types import CallContext
from pipeline.tools.cache.merge import Prefer, merge_into
from pipeline.tools.cache.recorded_sums import disagreement, recorded_checksums
from pipeline.tools.inventory import (
    local_records,
    open_store,
    read_runs,
    recorded_calls,
    recorded_keys,
    runs_dir,
)

UNRECORDED_STAGE = "unrecorded"


def _human(size: int) -> str:
    return tqdm.format_sizeof(size, "B", divisor=1000)


def _line_key(line: str) -> str | None:
    try:
        key = json.loads(line).get("key")
    except (ValueError, AttributeError, RecursionError):
        return None
    return key if isinstance(key, str) else None


def _plain_names(ctx: click.Context, param: click.Parameter, names: tuple[str, ...]) -> tuple[str, ...]:
    try:
        return tuple(safe_name(name, "--stage", stage_folders.STAGE_FIX) for name in names)
    except UnsafeNameError as exc:
        raise click.BadParameter(exc.message, ctx, param) from exc


def _pins(params: Params) -> Pins:
    return Pins(Path("."), Path(params.cache.recordings))


@click.group()
def cache() -> None:
    """The local call cache and the recordings: stats, verify, gc, merge, seed, export.

    \b
    Examples:
      judgeloop cache stats                 entries and bytes; hits and model calls of the last runs
      judgeloop cache verify                re-derive every key: catch a record edited by hand
      judgeloop cache merge ../alice/recordings   a collaborator's calls into ours
      judgeloop cache gc --dry-run          what no recording references
    """


def _local_stats(params: Params) -> dict[str, Any] | None:
    store = open_store(params)
    if store is None:
        return None
    entries = list(store.entries())
    # A key's prefix names its recipe: an entry under an older one is never looked up again.
    stale = sum(1 for key in entries if isinstance(key, str) and not key.startswith(KEY_PREFIX))
    local = {
        "entries": len(entries),
        "bytes": store.volume(),
        "older_key_recipe": stale,
        "refused": sum(isinstance(key, ForeignKey) for key in entries),
    }
    store.close()
    return local


def _recording_stats(params: Params) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for directory in stage_folders.stage_dirs(Path(params.cache.recordings)):
        lines = [line for _, line in stage_reader.split_recording(directory).calls]
        keys = {_line_key(line) for line in lines} - {None}
        size = sum(p.stat().st_size for p in directory.iterdir() if p.is_file())
        out[directory.name] = {"calls": len(lines), "unique_keys": len(keys), "bytes": size}
    return out


def _print_local(params: Params, local: dict[str, Any] | None) -> None:
    held = f"{local['entries']} entries, {_human(local['bytes'])}" if local else "none yet (a run creates it)"
    echo(f"local cache {params.cache.dir}: {held}")
    if local and local["older_key_recipe"]:
        echo(
            f"  {local['older_key_recipe']} of them under an older key recipe, never looked up again "
            "(`judgeloop cache gc` removes them once no recording or last run names them)"
        )
    if local and local["refused"]:
        echo(
            f"  {local['refused']} of them with keys judgeloop never writes (pickled or not text): refused, "
            "never read (`judgeloop cache verify --repair` deletes them)"
        )


def _print_stats(params: Params, out: dict[str, Any]) -> None:
    _print_local(params, out["local"])
    echo(f"recordings {params.cache.recordings}/:" + ("" if out["recordings"] else " none"))
    for stage, rec in out["recordings"].items():
        echo(f"  {stage:<10} {rec['calls']} calls, {rec['unique_keys']} unique keys, {_human(rec['bytes'])}")
    echo(f"last run per stage ({runs_dir(params)}):" + ("" if out["runs"] else " none on this machine"))
    for stage, run in out["runs"].items():
        misses = f", {run['replay_misses']} replay misses" if run["replay_misses"] else ""
        echo(
            f"  {stage:<10} mode {run['mode']}: {run['hits']} hits, {run['model_calls']} model calls{misses}"
        )


@cache.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of text.")
def stats(as_json: bool) -> None:
    """Entries and bytes of the local cache and the recordings; hits and model calls of the last runs."""
    params = load_params()
    runs = {
        stage: {
            "mode": run.mode,
            "hits": run.hits,
            "model_calls": run.model_calls,
            "replay_misses": run.replay_misses,
        }
        for stage, run in read_runs(params).items()
    }
    out: dict[str, Any] = {
        "cache_dir": params.cache.dir,
        "local": _local_stats(params),
        "recordings": _recording_stats(params),
        "runs": runs,
    }
    if as_json:
        click.echo(json.dumps(out, indent=1, sort_keys=True))
    else:
        _print_stats(params, out)


@cache.command()
@click.option(
    "--repair",
    "--delete-corrupt",
    "repair",
    is_flag=True,
    help="Delete the local entries that fail, so the call is made again (recordings are left alone).",
)
@click.pass_context
def verify(ctx: click.Context, repair: bool) -> None:
    """Re-derive every key from its stored request, in the local cache and in the recordings.

    Reports records whose request or reply was edited, that cannot be read, that are stored under
    another call's key (foreign) or that judgeloop never writes (a pickle: refused, never decoded),
    local entries that disagree with the recording of the same call (never served; --repair drops
    them), and recordings that do not match their entry in dvc.lock. Exit status 1 when anything is
    still wrong afterwards.
    """
    params = load_params()
    problems: list[str] = []
    checked, deleted = 0, 0
    recorded, found = recorded_checksums(Path(params.cache.recordings), _pins(params))
    store = open_store(params)
    # Each valid local record's checksum, not the record: at a million calls the records (every
    # one with its 20 kB request) would not fit in memory, and a verified record's checksum covers
    # all of it, so two records with one checksum are the same record (issue 33). The recorded
    # calls are kept the same way (streamed, one stage's recording in memory at a time).
    local: dict[str, str] = {}
    if store is not None:
        for key, record, problem in local_records(store):  # one record at a time
            checked += 1
            if problem is None and record is not None and isinstance(key, str):
                problem = disagreement(record, recorded.get(key))
                if problem is None:
                    local[key] = record.checksum
                    continue
            if repair and store.delete(key):
                deleted += 1
                echo(f"deleted local entry {key}: {problem}")
            else:
                problems.append(f"local cache {params.cache.dir}: {key}: {problem}")
        store.close()
    problems.sort()  # by key, as before the store listed them as stored (the same list on every machine)
    problems += found.problems
    checked += found.calls
    echo(f"checked {checked} records ({len(local)} local, {found.calls} recorded calls)")
    if deleted:
        echo(f"deleted {deleted} local entries that failed or disagreed with the recordings")
    if problems:
        echo(f"{len(problems)} problem(s):")
        for problem in problems:
            echo(f"  {problem}")
        if any(not p.startswith("local cache") for p in problems):
            echo(
                "Fix recordings: restore them from git (git checkout -- <file>), or delete the stage's "
                "folder and re-run the stage."
            )
        if any(p.startswith("local cache") for p in problems):
            echo(
                "Fix the local cache: judgeloop cache verify --repair (deletes the entries that fail; "
                "their calls are made again, or replayed from the recordings)"
            )
        ctx.exit(1)
    echo("all records verify")


def referenced_keys(params: Params, extra: Iterable[Path] = ()) -> set[str]:
    keys: set[str] = set()
    for root in (Path(params.cache.recordings), *extra):
        problems: list[str] = []
        keys |= recorded_keys(root, problems, VerifiedMemo.beside(Path(params.cache.dir)))  # keys only
        if problems:
            raise JudgeloopError(
                f"{root}: {len(problems)} recorded call(s) cannot be read, so what they reference is "
                "unknown. Fix: run `judgeloop cache verify` and repair them first."
            )
    for run in read_runs(params).values():
        keys |= set(run.keys)
    return keys


@cache.command()
@click.option("--dry-run", is_flag=True, help="Only say what would be deleted.")
@click.option(
    "--keep",
    "keep_dirs",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Another recordings folder whose calls are kept too (repeatable).",
)
def gc(dry_run: bool, keep_dirs: tuple[Path, ...]) -> None:
    """Delete local entries that no recording references.

    Kept: every key in the recordings (and --keep folders), and every key of each stage's last run
    (a stage that failed wrote no recording, but its finished calls let the rerun resume).
    """
    params = load_params()
    store = open_store(params)
    if store is None:
        echo(f"no local cache at {params.cache.dir}: nothing to collect")
        return
    keep = referenced_keys(params, keep_dirs)
    total, freed = 0, 0
    dropped: set[str] = set()
    for key in list(store.keys()):
        total += 1
        if key in keep:
            continue
        dropped.add(key)
        freed += len(store.get_raw(key) or b"")
        if not dry_run:
            store.delete(key)
    # Then the text blocks that no entry left refers to (pipeline.llm.cache.blocks).
    blocks = store.collect_blocks(dry_run=dry_run, dropping=frozenset(dropped))
    store.close()
    verb = "would delete" if dry_run else "deleted"
    echo(
        f"{verb} {len(dropped)} of {total} local entries ({_human(freed)}); kept {total - len(dropped)} "
        f"referenced; {verb} {blocks.deleted} of {blocks.blocks} text blocks ({_human(blocks.freed)}) "
        "that no entry kept refers to"
    )


def _reply_diff(ours: str, theirs: str) -> list[str]:
    lines = difflib.unified_diff(ours.splitlines(), theirs.splitlines(), "ours", "theirs", n=1, lineterm="")
    return [f"    {line}" for line in lines]


@cache.command()
@click.argument("other", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--into",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The recordings folder merged into (default: cache.recordings).",
)
@click.option("--ours", "prefer", flag_value="ours", help="On a conflict keep our reply, and succeed.")
@click.option("--theirs", "prefer", flag_value="theirs", help="On a conflict take their reply, and succeed.")
@click.pass_context
def merge(ctx: click.Context, other: Path, into: Path | None, prefer: Prefer | None) -> None:
    """Take a collaborator's recordings (OTHER) into ours: the union of the calls, stage by stage.

    The same key in the same context is one call. The same key answered with a different reply on
    each side is a conflict: ours is kept, every conflict is listed, and the exit status is 1 unless
    --ours or --theirs says which to keep. Replies that differ only in metadata (timestamps,
    durations) are the same answer, not a conflict. The result is written sorted (deterministic).
    """
    target = into or Path(load_params().cache.recordings)
    result = merge_into(target, other, prefer or "ours")
    for stage in result.stages:
        total = stage.ours + stage.added
        echo(f"{stage.stage}: {stage.ours} ours + {stage.added} new from theirs = {total} calls")
    for conflict in result.conflicts:
        echo(f"conflict: key {conflict.key}")
        for side, call in (("ours", conflict.ours), ("theirs", conflict.theirs)):
            echo(f"  {side + ':':<7} {call.context.describe()}")
        ours, theirs = conflict.ours.record.reply, conflict.theirs.record.reply
        echo("\n".join(_reply_diff(ours.text, theirs.text)))
        if ours.done_reason != theirs.done_reason:
            echo(f"    done_reason: ours {ours.done_reason}, theirs {theirs.done_reason}")
    if result.took_theirs:
        echo(
            f"took theirs for {result.took_theirs} conflicting key(s); the local cache still holds ours: "
            "run `judgeloop cache seed --replace` to use the merged replies here"
        )
    pins = Pins(Path("."), target)
    for stage in result.stages:
        pin = pins.pin(target / stage.stage)
        if pin is not None and pins.problem(target / stage.stage) is not None:
            echo(
                f"note: {pin.path} no longer matches dvc.lock, and a stage refuses to read it until it is "
                f"re-locked: keep the merge with `{pin.relock()}`, or undo it with "
                f"`git checkout -- {pin.path}`"
            )
    if result.conflicts and prefer is None:
        echo(
            f"{len(result.conflicts)} conflicting call(s): kept ours. "
            "Re-run with --ours to accept that, or --theirs to take theirs.",
            err=True,
        )
        ctx.exit(1)


def _same(store: CallStore, record: CallRecord) -> bool:
    try:
        return store.get(record.key) == record
    except CorruptRecordError:
        return False


@cache.command()
@click.argument(
    "recordings_dir", required=False, type=click.Path(exists=True, file_okay=False, path_type=Path)
)
@click.option(
    "--replace", is_flag=True, help="Overwrite a local record whose reply differs from the recorded one."
)
def seed(recordings_dir: Path | None, replace: bool) -> None:
    """Copy every recorded call (default: cache.recordings) into the local cache."""
    params = load_params()
    source = recordings_dir or Path(params.cache.recordings)
    store = CallStore(Path(params.cache.dir))
    counts = {"new": 0, "already present": 0, "replaced": 0, "kept local (differs)": 0}
    seen: set[str] = set()
    for loaded in stage_reader.read_all(source):
        record = loaded.call.record
        if record.key in seen:
            continue
        seen.add(record.key)
        if record.key not in store:
            store.put(record)
            counts["new"] += 1
        elif _same(store, record):
            counts["already present"] += 1
        elif replace:
            store.put(record)
            counts["replaced"] += 1
        else:
            counts["kept local (differs)"] += 1
    store.close()
    echo(
        f"seeded {params.cache.dir} from {source}: " + ", ".join(f"{n} {what}" for what, n in counts.items())
    )


@cache.command()
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--stage", "stages", multiple=True, callback=_plain_names, help="Only these stages (repeatable)."
)
def export(out_dir: Path, stages: tuple[str, ...]) -> None:
    """Write every record of the local cache to OUT_DIR as recordings (one folder per stage).

    A key goes under each stage and context where the recordings show it; a key only the last run of
    a stage names (its recording was not written: the stage failed) goes under that stage with a
    bare context; anything else under `unrecorded/`. OUT_DIR can then be merged, seeded or replayed.
    """
    params = load_params()
    recorded = Path(params.cache.recordings)
    if out_dir.resolve() == recorded.resolve():
        raise JudgeloopError(
            f"{out_dir} is the recordings folder itself. Fix: export elsewhere, then merge it."
        )
    store = open_store(params)
    if store is None:
        raise JudgeloopError(f"no local cache at {params.cache.dir}: nothing to export")
    contexts: dict[str, list[CallContext]] = {}
    for _, _, call in recorded_calls(recorded, []):  # streamed; a damaged line is verify's to report
        contexts.setdefault(call.record.key, []).append(call.context)
    for stage, run in read_runs(params).items():
        for key in run.keys:
            contexts.setdefault(key, [CallContext(stage=stage)])
    out: dict[str, list[RecordedCall]] = {}
    skipped = 0
    for entry, record, problem in local_records(store):
        if record is None or problem is not None or not isinstance(entry, str):
            skipped += 1
            continue
        for context in contexts.get(entry, [CallContext(stage=UNRECORDED_STAGE)]):
            if not stages or context.stage in stages:
                out.setdefault(context.stage, []).append(RecordedCall(context=context, record=record))
    store.close()
    # Checked before anything is written: a stage name read from a recording must not lead out.
    targets = {stage: stage_folders.stage_dir(out_dir, stage) for stage in out}
    for stage, calls in sorted(out.items()):
        stage_writer.write_stage(targets[stage], calls)
        echo(f"{stage}: {len(calls)} calls -> {targets[stage]}")
    if skipped:
        echo(f"skipped {skipped} local entries that do not verify (see `judgeloop cache verify`)")
