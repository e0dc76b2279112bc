"""A shard of calls' table of items: where each item's lines lie, so that auditing one item of a
million calls reads that item's lines, not every shard whole (issue 33).

`audit --item` must show every call of the item, so it cannot bisect the call lines as a key's
lookup does (a line of the item left out would go unseen): it read and hashed every shard of calls
of the stage. The sharded writer (pipeline.llm.recordings.shards) now writes beside each shard of
calls `calls-<d>-<h>.jsonl` a table `items-<d>-<h'>.jsonl`, named in the manifest with its sha256
after the shards (so dvc.lock's pin of the folder covers it, through the manifest and directly):

    {"bytes":<the shard's size>,"items_table":1,"lines":<its lines>,"runs":<r>,"sha256":<the shard's>,
     "shard":"calls-<d>-<h>.jsonl"}
    ["901","902",...]           each run's item, in file order
    [5210,2604,...]             each run's size in bytes
    [2,1,...]                   each run's count of lines
    "<64 hex digits a run>"     each run's sha256, one after another

A run is a stretch of consecutive lines of one item (the writer sorts a shard's lines by item, so
an item is one run a shard); the runs, in file order, tile the shard: each starts where the one
before ends, and their sizes add up to the shard's size. An item's calls are its runs' bytes. The
table is kept in columns so that a reader parses it in a few C calls (orjson), not a line a run: at
a million calls a stage has hundreds of thousands of runs.

What a reader checks before it serves anything from a table, falling back to reading every shard
whole (today's read, which names what is wrong) at the first thing that fails, never erring on a
table alone: the table is the one the manifest names for that shard and hashes to the sha256 the
manifest gives it; its opening names that shard with the manifest's sha256 and the shard's size as
it is on disk; its runs are well formed and tile that size (so no line of the shard is outside
every run: a table that lists fewer lines than the shard holds, or places past its end, is
refused); each run read hashes to its sha256 and splits into its count of lines; each line is a
call of that item whose key falls in that shard. Each call is then verified as a whole read
verifies it (key re-derived, checksum: CallRecord.problem, shown by audit). An item named by two
runs has both read. A recording written before the tables (no table in its manifest), or in one
file, is read as before.

What a reader of one item no longer checks: the bytes of the other items' runs. A shard edited in
place outside the item's runs, its size kept, is not seen by this reader (as a block found where
it lies does not check its shard's other blocks, pipeline.llm.recordings.block_places); a replay,
status and `cache verify` still hash every shard against the manifest and the folder against
dvc.lock.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import Any

import orjson

from pipeline.errors import CorruptRecordError
from pipeline.llm.keys import canonical_json
from pipeline.llm.recordings import dvc_links, line_checks, line_format, shards, stage_folders, stage_reader
from pipeline.llm.recordings.block_places import sharded_blocks

FORMAT = 1  # the table's layout, in its opening: another is not read (the whole read instead)


@dataclass
class _Run:
    item: str
    size: int = 0
    lines: int = 0
    digest: Any = None


def write_calls(directory: Path, prefix: str, lines: Iterable[tuple[str, bytes]]) -> list[tuple[str, str]]:
    """One shard of calls written from its (item, line with its "\\n") in order, then its table of
    items; the two (file, sha256), the shard first (as the manifest names them: shards.commit)."""
    runs: list[_Run] = []

    def chunks() -> Iterator[bytes]:
        for item, line in lines:
            _counted(runs, item, line)
            yield line

    name, sha = shards.write_shard(directory, "calls", prefix, chunks())
    table = shards.write_shard(directory, shards.TABLE_KIND, prefix, [_table_text(name, sha, runs)])
    return [(name, sha), table]


def writers_table(name: str, sha: str, lines: Iterable[tuple[str, bytes]]) -> bytes:
    """The table write_calls writes beside the shard of calls `name` (its sha256 `sha`) of these
    (item, line with its "\\n") in order: for a check that the table there is the writer's own
    (pipeline.llm.recordings.unchanged), made by the same code."""
    runs: list[_Run] = []
    for item, line in lines:
        _counted(runs, item, line)
    return _table_text(name, sha, runs)


def _counted(runs: list[_Run], item: str, line: bytes) -> None:
    """A shard's next line counted in its item's run (a new run where the item changes)."""
    if not runs or runs[-1].item != item:
        runs.append(_Run(item, digest=hashlib.sha256()))
    run = runs[-1]
    run.size += len(line)
    run.lines += 1
    run.digest.update(line)


def _table_text(name: str, sha: str, runs: list[_Run]) -> bytes:
    """A shard of calls' table of items (see the module) from its runs, as the writer writes it."""
    opening = {
        "bytes": sum(run.size for run in runs),
        "items_table": FORMAT,
        "lines": sum(run.lines for run in runs),
        "runs": len(runs),
        "sha256": sha,
        "shard": name,
    }
    columns = [
        opening,
        [run.item for run in runs],
        [run.size for run in runs],
        [run.lines for run in runs],
        "".join(run.digest.hexdigest() for run in runs),
    ]
    return "".join(canonical_json(column) + "\n" for column in columns).encode("utf-8")


class _Unusable(Exception):
    """The table cannot be used (missing, another form, not matching): the whole read instead."""


COUNTS = re.compile(rb"\[(?:[1-9][0-9]{0,15}(?:,[1-9][0-9]{0,15})*)?\]")  # whole numbers above 0


def _counts(line: bytes, runs: int) -> list[int]:
    """A column of counts, one a run, each a whole number above 0 (checked as written, in one match)."""
    if COUNTS.fullmatch(line) is None:
        raise _Unusable
    column: list[int] = orjson.loads(line)
    if len(column) != runs:
        raise _Unusable
    return column


@dataclass
class _Table:
    items: list[Any]  # each run's item (one that is not a string is no item asked for)
    sizes: list[int]
    lines: list[int]
    digests: str

    def runs_of(self, wanted: Collection[str]) -> list[tuple[_Run, int, int]]:
        """The runs of `wanted` items in file order, each with its offset and its first line's number
        (found and summed in C: a table at a million calls has hundreds of thousands of runs)."""
        found: list[int] = []
        for item in wanted:
            at = -1
            with contextlib.suppress(ValueError):
                while True:
                    at = self.items.index(item, at + 1)
                    found.append(at)
        offsets = list(accumulate(self.sizes, initial=0))
        numbers = list(accumulate(self.lines, initial=1))
        return [
            (
                _Run(self.items[i], self.sizes[i], self.lines[i], self.digests[64 * i : 64 * i + 64]),
                offsets[i],
                numbers[i],
            )
            for i in sorted(found)
        ]


def _runs(data: bytes, name: str, sha: str, size: int) -> _Table:
    """A table's columns, checked against the shard it names (its name, sha256 and size on disk), its
    runs tiling that size."""
    lines = data.split(b"\n")
    if len(lines) != 6 or lines[-1] != b"":
        raise _Unusable
    try:
        head, items, digests = orjson.loads(lines[0]), orjson.loads(lines[1]), orjson.loads(lines[4])
    except ValueError:
        raise _Unusable from None
    runs = head.get("runs") if isinstance(head, dict) else None
    expected = {
        "bytes": size,
        "items_table": FORMAT,
        "lines": None,
        "runs": runs,
        "sha256": sha,
        "shard": name,
    }
    if not isinstance(head, dict) or type(runs) is not int or head | {"lines": None} != expected:
        raise _Unusable
    if (
        not isinstance(items, list)
        or len(items) != runs
        or not isinstance(digests, str)
        or len(digests) != 64 * runs
    ):
        raise _Unusable
    table = _Table(items, _counts(lines[2], runs), _counts(lines[3], runs), digests)
    if sum(table.sizes) != size or sum(table.lines) != head["lines"]:
        raise _Unusable  # the runs do not tile the shard: a line outside every run, or past its end
    return table


def _table_of(directory: Path, table: tuple[str, str] | None, name: str, sha: str, fd: int) -> _Table:
    """The runs of the shard of calls `name` (open as `fd`), from its table as the manifest names it."""
    if table is None:
        raise _Unusable  # written before the tables, or by hand
    try:
        data = shards.shard_bytes(directory, table[0], table[1], None)
    except CorruptRecordError:
        raise _Unusable from None  # missing, or not as the manifest hashes it
    return _runs(data, name, sha, os.fstat(fd).st_size)


Line = tuple[Path, int, str, str]  # the shard, the line's number there, the line, its run's item


def _item_lines(path: Path, fd: int, table: _Table, wanted: Collection[str]) -> list[Line]:
    """The lines of the runs of `wanted` items, each run read at its place and checked."""
    found: list[Line] = []
    for run, at, number in table.runs_of(wanted):
        data = os.pread(fd, run.size, at)
        if (
            len(data) != run.size
            or not data.endswith(b"\n")
            or data.count(b"\n") != run.lines
            or hashlib.sha256(data).hexdigest() != run.digest
        ):
            raise _Unusable
        for offset, line in enumerate(data[:-1].split(b"\n")):
            where = f"{path}:{number + offset}"
            found.append((path, number + offset, line_checks.decoded_line(line, where), run.item))
    return found


def _tabled_lines(directory: Path, entries: list[tuple[str, str]], wanted: Collection[str]) -> list[Line]:
    tables = {
        shards.prefix_of(name)[1]: (name, sha) for name, sha in entries if name.startswith(shards.TABLE_KIND)
    }
    lines: list[Line] = []
    for name, sha in entries:
        if shards.prefix_of(name)[0] != "calls":
            continue
        path = directory / name
        try:
            fd = dvc_links.open_file(path)  # never through a link, but DVC's into its cache
        except OSError:
            raise _Unusable from None  # the whole read names what is wrong (missing, a link)
        try:
            table = _table_of(directory, tables.get(shards.prefix_of(name)[1]), name, sha, fd)
            lines += _item_lines(path, fd, table, wanted)
        finally:
            os.close(fd)
    return lines


def tabled_items(directory: Path, items: Collection[str]) -> list[stage_reader.LoadedCall] | None:
    """The calls of `items` in a sharded stage's recording, read through its tables of items (see
    the module), unverified as read_stage(verify=False) leaves them (audit shows each call's own
    verification); None where the tables cannot be used: a recording in one file, one written before
    the tables, a table missing or not matching (then the caller reads the shards whole)."""
    wanted = set(items)
    path = directory / stage_folders.CALLS_FILE
    if not wanted or not stage_folders.has_recording(directory):
        return None
    stage_folders.refuse_linked(directory)
    with path.open("rb") as opening:
        if not shards.is_manifest(opening.read(len(shards.MANIFEST_OPENING)).decode("utf-8", "replace")):
            return None
    try:
        entries = shards.manifest_entries(path, line_checks.recording_text(path))
        named = [(name, sha) for name, sha in entries if not name.startswith(shards.TABLE_KIND)]
        shards.refuse_strays(directory, os.listdir(directory), {name for name, _ in named})
        lines = _tabled_lines(directory, entries, wanted)
        refs = {blob for _, _, line, _ in lines for blob in line_format.blob_refs(line)}
        blobs = sharded_blocks(directory, named, refs)
        return None if blobs is None else [_checked(line, blobs) for line in lines]
    except (_Unusable, CorruptRecordError):
        return None  # read whole, which names what is wrong


def _checked(found: Line, blobs: dict[str, str]) -> stage_reader.LoadedCall:
    """A line of a run parsed: a call of the run's item, whose key falls in the line's shard."""
    path, number, line, item = found
    call = line_checks.parse_call_line(line, blobs, f"{path}:{number}")
    if call.context.item != item or shards.prefix_of(path.name)[1] != shards.shard_of(call.record.key):
        raise _Unusable
    return stage_reader.LoadedCall(path, number, call)
