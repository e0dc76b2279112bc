"""`judgeloop cache seed`: copy recorded calls into the local store."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.errors import CorruptRecordError
from pipeline.experiments.params import load_params
from pipeline.llm.cache.store import CallStore
from pipeline.llm.recordings import stage_reader
from pipeline.llm.records import CallRecord
from pipeline.llm.terminal import echo


def _same(store: CallStore, record: CallRecord) -> bool:
    try:
        return store.get(record.key) == record
    except CorruptRecordError:
        return False


@click.command()
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
