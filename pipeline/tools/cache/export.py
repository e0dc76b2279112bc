"""`judgeloop cache export`: write the local store out as recordings, each key under the stages and
contexts the recordings (or the last runs) show it in."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.errors import JudgeloopError, UnsafeNameError
from pipeline.experiments.params import load_params
from pipeline.llm.files import safe_name
from pipeline.llm.recordings import stage_folders, stage_writer
from pipeline.llm.records import RecordedCall
from pipeline.llm.terminal import echo
from pipeline.llm.types import CallContext
from pipeline.tools.inventory import local_records, open_store, read_runs, recorded_calls

UNRECORDED_STAGE = "unrecorded"


def _plain_names(ctx: click.Context, param: click.Parameter, names: tuple[str, ...]) -> tuple[str, ...]:
    try:
        return tuple(safe_name(name, "--stage", stage_folders.STAGE_FIX) for name in names)
    except UnsafeNameError as exc:
        raise click.BadParameter(exc.message, ctx, param) from exc


@click.command()
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
    # Checked before anything is written: a stage name read from a recording must not lead out,
    # nor share a folder with another's where the file system ignores case (macOS, Windows).
    targets = {stage: stage_folders.stage_dir(out_dir, stage) for stage in out}
    _one_folder_each(sorted(out))
    for stage, calls in sorted(out.items()):
        stage_writer.write_stage(targets[stage], calls)
        echo(f"{stage}: {len(calls)} calls -> {targets[stage]}")
    if skipped:
        echo(f"skipped {skipped} local entries that do not verify (see `judgeloop cache verify`)")


def _one_folder_each(stages: list[str]) -> None:
    by_folder: dict[str, list[str]] = {}
    for stage in stages:
        by_folder.setdefault(stage.casefold(), []).append(stage)
    same = [names for names in by_folder.values() if len(names) > 1]
    if same:
        raise JudgeloopError(
            f"stages {' and '.join(same[0])} differ only in case: where the file system ignores case "
            "(macOS, Windows) they are one folder, and one's calls would replace the other's; nothing "
            "was written. Fix: export them one at a time to two folders (--stage), or rename the "
            "run summary or recording that names the odd one (.judgeloop/runs/, recordings/)"
        )
