"""`judgeloop cache verify`: re-derive every key, in the local store and the recordings, and hold the
local store against the recordings (pipeline.tools.cache.recorded_sums); --repair deletes what fails."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.experiments.params import Params, load_params
from pipeline.llm.recordings.pins import Pins
from pipeline.llm.terminal import echo
from pipeline.tools.cache.recorded_sums import disagreement, recorded_checksums
from pipeline.tools.inventory import local_records, open_store


def _pins(params: Params) -> Pins:
    return Pins(Path("."), Path(params.cache.recordings))


@click.command()
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
