"""`judgeloop cache gc`: drop the local entries that no recording and no last run references
(referenced_keys), then the text blocks no entry left refers to."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import click

from pipeline.errors import JudgeloopError
from pipeline.experiments.params import Params, load_params
from pipeline.llm.recordings.verified_memo import VerifiedMemo
from pipeline.llm.terminal import echo
from pipeline.tools.cache.sizes import human
from pipeline.tools.inventory import open_store, read_runs, recorded_keys


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


@click.command()
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
        f"{verb} {len(dropped)} of {total} local entries ({human(freed)}); kept {total - len(dropped)} "
        f"referenced; {verb} {blocks.deleted} of {blocks.blocks} text blocks ({human(blocks.freed)}) "
        "that no entry kept refers to"
    )
