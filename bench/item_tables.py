"""Add the tables of items (pipeline.llm.recordings.item_table) to a kept run's sharded recordings
written before them, without a replay: each shard of calls is written again through the writer's own
item_table.write_calls (its bytes unchanged, so its file is kept) with each line's item read from its
context, and the manifest renamed into place naming the shards and then the tables, as the sharded
writer names them. What a replay with this code writes, in seconds rather than the replay's minutes
(at 96,355 calls a replay is about 300 CPU s).

    nice -n 19 .venv/bin/python bench/item_tables.py /tmp/million/calls-100000

A folder that already has tables, or is one file, is left as it is. Results in bench/README.md.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import click
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.llm.files import locked
from pipeline.llm.recordings import item_table, line_checks, shards, stage_folders


def _lines(path: Path) -> Iterator[tuple[str, bytes]]:
    with path.open("rb") as shard:
        for line in shard:
            yield str(orjson.loads(line)["context"].get("item", "")), line


def add_tables(directory: Path) -> int:
    """The tables written for one stage's folder (0: one file, or tables there already)."""
    manifest = directory / stage_folders.CALLS_FILE
    with locked(directory):
        text = line_checks.recording_text(manifest)
        if not shards.is_manifest(text):
            return 0
        entries = shards.manifest_entries(manifest, text)
        if any(name.startswith(shards.TABLE_KIND) for name, _ in entries):
            return 0
        tables = []
        for name, sha in entries:
            kind, prefix = shards.prefix_of(name)
            if kind == "calls":
                shard, table = item_table.write_calls(directory, prefix, _lines(directory / name))
                if shard != (name, sha):
                    raise click.ClickException(f"{directory / name}: not written back byte-identically")
                tables.append(table)
        shards.commit(manifest, [*entries, *tables])
        shards.drop_unnamed(directory, {name for name, _ in [*entries, *tables]})
        return len(tables)


@click.command()
@click.argument("root", type=click.Path(file_okay=False, exists=True, path_type=Path))
def main(root: Path) -> None:
    """ROOT: a synthetic run's folder (bench/million.py --keep)."""
    for directory in stage_folders.stage_dirs(root / "recordings"):
        cpu = time.process_time()
        added = add_tables(directory)
        click.echo(f"{directory.name:<10} {added:3d} tables  CPU {time.process_time() - cpu:6.2f} s")


if __name__ == "__main__":
    sys.exit(main())
