"""Recorded calls as text that travels with the experiment.

Why text, next to the diskcache: the SQLite file is not diffable, DVC re-uploads it whole on any
change, and two collaborators cannot merge it. Each stage therefore writes the calls it made to
one file,

    recordings/<stage>/calls.jsonl   one call per line (context, key, checksum, model, request,
                                     reply, when), sorted; then one line per text block shared by
                                     calls, {"blob": id, "text": ...}, sorted by id

in canonical JSON, so the same calls give the same bytes, a new call is a new line in a diff, and
git merges two collaborators' additions line by line. (Past shards.SHARD_AT calls, calls.jsonl is
instead a manifest naming sixteen shards by key, each a file of this form, so that a rerun rewrites
only the shards whose calls changed: pipeline.llm.recordings.shards.) Any recording can seed an
empty local cache, so a fresh clone replays with no model.

Content repeated across calls (the transcript inside every judge prompt, the rubric) is stored
once: message text is cut into blocks of whole lines at content-defined boundaries (a line whose
CRC-32 is 0 mod 8 ends a block once the block has MIN_BLOCK characters), so the same transcript
yields the same blocks whatever prompt surrounds it. Blocks of MIN_BLOCK characters or more become
blob lines; a message becomes a list of literal strings and {"blob": hash} references.

One file, written in one step. The calls and the blocks they refer to are one file, replaced by
one rename of a temporary file of its own (pipeline.llm.files.atomic_write), so a writer killed at
any moment leaves the old recording or the new one, never a mix. (Before, `blobs.jsonl` beside
`calls.jsonl` was replaced by a second rename, and a kill between the two left calls whose text was
gone. A folder in that layout is still read, its blobs.jsonl with it, and is rewritten as one file
by the next write.) Each call carries its checksum and each blob is checked against its id, so a
damaged file fails, naming its line, rather than being served.

Whose calls a recording holds, and who may replace them. A writer takes the stage folder's lock
(pipeline.llm.files.locked), so writers take turns, across processes, and then either

- replaces the recording (`keep=None`): a DVC pipeline stage. Its recording is exactly its last
  run, an output DVC pins in dvc.lock, and only that stage writes it; a rerun of the stage
  legitimately replaces its own previous run. Or
- adds to it (`keep=` a predicate on the calls already there): `judgeloop judge-evaluate`, which
  many runs write into one `--stage` folder. A batch keeps every call already recorded and adds
  its own: two batches, one after the other or at once, both keep all their calls, and what one
  recorded stays until `judgeloop cache gc` finds no recording that needs it. (A single answer
  judged again under the same item replaces only that item's earlier calls.)

Line breaks inside a call. JSON escapes every control character, but not U+0085, U+2028 and U+2029,
which str.splitlines (and many editors and tools) take for line breaks: a reply holding one would
split its line in two. So a line that holds any of the three has them written as JSON escapes
(\\u2028), which parse back to the same text, and a recording is read split at "\\n" only, so a file
written raw before still reads. Lines without them (every recording before) keep their bytes.

Stage names become folder names, so a name read from the command line or from a file is checked
(pipeline.llm.files.child): a plain name that stays inside the recordings folder. A stage folder
that is a symbolic link, or holds one, is refused before it is read or written
(pipeline.llm.files.refuse_links): through it a stage would write, or read, another's recording.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import os
import re
import threading
from array import array
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from pydantic import ValidationError

from pipeline.errors import CorruptRecordError, UnwritableTextError
from pipeline.llm.blocks import Laid, Part, pack_parts
from pipeline.llm.blocks import split_blocks as split_blocks  # the rule, shared with the cache (re-exported)
from pipeline.llm.bounds import MAX_DEPTH, MAX_LINE_BYTES, depth_problem, long_line
from pipeline.llm.files import TMP_SUFFIX, atomic_write_chunks, child, locked, refuse_links
from pipeline.llm.keys import canonical_json
from pipeline.llm.recordings import layouts, shards
from pipeline.llm.recordings.call_places import CallPlaces
from pipeline.llm.recordings.spool import BlockLines, Place, Spool, block_shards
from pipeline.llm.recordings.verified_memo import IN_PROCESS, VerifiedMemo
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import CallContext

if TYPE_CHECKING:
    from pipeline.llm.recordings.stage_index import StageIndex

CALLS_FILE = "calls.jsonl"
LEGACY_BLOBS_FILE = "blobs.jsonl"  # the shared blocks' own file, before they moved into calls.jsonl
STAGE_FIX = "name the stage with letters, digits, '.', '_' and '-' only"
LINK_FIX = "then restore the stage's recording from git (git checkout -- recordings/), or re-record the stage"


def blob_id(text: str) -> str:
    # 64 bits of sha256: blob ids are only compared within one stage's recording, which checks
    # every blob against its id on read, and short ids keep the many references in calls small.
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def pack_content(text: str, blobs: dict[str, str]) -> str | list[Part]:
    def keep(block: str) -> dict[str, str]:
        blob = blob_id(block)
        blobs[blob] = block
        return {"blob": blob}

    parts = pack_parts(text, keep)
    if len(parts) == 1 and isinstance(parts[0], str):
        return parts[0]
    return parts


def unpack_content(
    content: str | list[Any], blobs: Mapping[str, str], where: str, layout: list[Laid] | None = None
) -> str:
    """The message's text; `layout`: where its parts are added, as pipeline.llm.blocks.Laid."""
    if isinstance(content, str):
        if layout is not None:
            layout.append(content)
        return content
    out: list[str] = []
    laid: list[str | tuple[str]] = []
    for part in content:
        if isinstance(part, str):
            out.append(part)
            laid.append(part)
            continue
        blob = part.get("blob")
        try:  # one lookup, not `in` and then `[]`: a recording's blocks may be read when asked for
            text = blobs[blob]
        except KeyError:
            raise CorruptRecordError(
                f"{where}: refers to blob {blob}, which the recording does not hold. "
                "Fix: restore the file from git, or re-record the stage."
            ) from None
        out.append(text)
        laid.append((text,))
    if layout is not None:
        layout.append(laid)
    return "".join(out)


# The line breaks of str.splitlines that JSON leaves unescaped (it escapes \r, \x0b, \x1c and the like).
_UNESCAPED_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def line_safe(line: str) -> str:
    """A JSON line with the line breaks JSON leaves raw written as escapes; inside a JSON line they
    can only be inside strings, where the escape parses back to the same character."""
    if "\x85" in line or "\u2028" in line or "\u2029" in line:
        return line.translate(_UNESCAPED_BREAKS)
    return line


def call_to_line(call: RecordedCall, blobs: dict[str, str]) -> str:
    record = call.record.model_dump(mode="json")
    for message in record["request"]["messages"]:
        message["content"] = pack_content(message["content"], blobs)
    record["context"] = call.context.model_dump(mode="json", exclude_defaults=True)
    return line_safe(canonical_json(record))


def blob_line(blob: str, text: str) -> str:
    return line_safe(canonical_json({"blob": blob, "text": text}))


# A block reference in a call line: `{"` can only open an object there (a quote inside a JSON
# string is escaped), and a line whose calls parsed refers only to blocks its recording holds.
BLOB_REF = re.compile(r'\{"blob":"([0-9a-f]{16})"\}')


def blob_refs(line: str) -> list[str]:
    """The ids of the blocks a call line refers to."""
    return BLOB_REF.findall(line)


def file_lines(text: str) -> list[str]:
    """A recording's lines, split at "\\n" only: never at a character str.splitlines also breaks at."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def stage_dir(root: Path, stage: str) -> Path:
    """root / stage, for a stage name that is a plain name and stays inside root."""
    return child(root, stage, "stage", STAGE_FIX)


def refuse_linked(directory: Path) -> None:
    """UnsafeNameError if the stage folder is a symbolic link or holds one, however deep."""
    refuse_links(directory, "the recordings", LINK_FIX, itself=True, below=True)


Where = tuple[Any, ...]  # a call's place in its recording's order: its context's sort key, then its key
# Where a written line comes from: a line made here (its Place in the spool: a number from 0, or
# text) or a line of the stage's own recording kept as it is (line n as -1 - n: spool numbers are
# never negative, and one int each is what a million sources cost least as).
Source = Place
_SHARDS: int = 16**shards.SHARD_DIGITS


def _kept_source(line: int) -> int:
    return -1 - line


def _kept_line(source: Source) -> int | None:
    """The recording's line a source keeps, or None for a line made here."""
    return -1 - source if isinstance(source, int) and source < 0 else None


def _packed(source: int, key: str) -> int:
    """A call's line (a spool number, or a kept line as _kept_source gives it) and its shard as one
    number at or above 0, as CallPlaces holds it: made line n as 2n, kept line n as 2n + 1, times
    the shards, plus the shard's number."""
    line = _kept_line(source)
    at = 2 * source if line is None else 2 * line + 1
    return at * _SHARDS + int(shards.shard_of(key), 16)


def _unpacked(number: int) -> tuple[Source, int]:
    """The line and the shard's number of a number _packed made."""
    at, shard = divmod(number, _SHARDS)
    return (_kept_source(at >> 1) if at & 1 else at >> 1), shard


class StageRecording:
    """One stage's recording, built a call at a time, its lines on disk until it is written (Spool).

    A call's line is made when the call is added, by the thread that made it, and spooled; only its
    place is kept. A cache hit that the stage's own recording holds as it is (context and record:
    StageIndex.verbatim_at) keeps that line instead, by its number: packing a 20 kB prompt into blocks
    costs ten times the hit itself, and the same call gives the same line. The same call (context and
    key) added twice is one line; a line made for it wins over one kept.
    """

    def __init__(self) -> None:
        self._spool = Spool()
        # Each call's line, made here (in the spool) or kept (of `_recorded`), by its Where, held as
        # its hash (CallPlaces: issue 33); a line made here that UTF-8 cannot hold, as its text.
        self._calls = CallPlaces()
        self._text: dict[Where, str] = {}
        self._blobs = BlockLines()  # blob id -> its blob line, in the spool
        self._recorded: StageIndex | None = None
        self._labels: dict[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]] = {}
        self._lock = threading.Lock()

    def add(self, call: RecordedCall, *, recorded: StageIndex | None = None, key: str | None = None) -> None:
        """Add a call; `recorded`: the stage's own recording as read for this run, whose line this
        call keeps if it records this very call; `key`: its record's key, as a string the caller holds
        anyway (held here in place of the record's own copy)."""
        where = self._where(call, call.record.key if key is None else key)
        if call.cache_hit:
            with self._lock:
                if where in self._text or self._holds(where):
                    return
            if self._keeps(where, call, recorded):
                return
        blobs: dict[str, str] = {}
        place = self._spool.put(call_to_line(call, blobs))
        with self._lock:
            new = [blob for blob in blobs if blob not in self._blobs]
        blob_places = {blob: self._spool.put(blob_line(blob, blobs[blob])) for blob in new}
        with self._lock:
            if isinstance(place, str):
                self._text[where] = place
            else:  # the line made last wins
                self._text.pop(where, None)
                self._calls.set(where, _packed(place, where[-1]), self._where_of)
            for blob, blob_place in blob_places.items():
                self._blobs.setdefault(blob, blob_place)

    def _where(self, call: RecordedCall, key: str) -> Where:
        return self._where_in(call.context, key)

    def _where_in(self, context: CallContext, key: str) -> Where:
        """The call's place in the order, its labels' tuple shared with every call of the same labels
        (a stage has a few: held once each, not once a call; issue 33)."""
        *head, labels, attempt = context.sort_key()
        labels = self._labels.setdefault(labels, labels)  # one step (tuples of str), so thread-safe
        return (*head, labels, attempt, key)

    def _where_of(self, number: int) -> Where:
        """The Where of the call whose line CallPlaces holds as `number`, read back from that line."""
        raw = orjson.loads(self._raw(_unpacked(number)[0]))
        return self._where_in(CallContext.model_validate(raw["context"]), raw["key"])

    def _holds(self, where: Where) -> bool:
        """Whether a line made here in the spool, or kept, is held for the call."""
        return self._calls.get(where, self._where_of) is not None

    def _keeps(self, where: Where, call: RecordedCall, recorded: StageIndex | None) -> bool:
        """Whether the call is kept as its line in `recorded` (then noted), not made again."""
        found = None if recorded is None else recorded.verbatim_at(call)
        with self._lock:
            if found is None or self._recorded not in (None, recorded):
                return False
            self._recorded = recorded
            if where not in self._text:
                self._calls.setdefault(where, _packed(_kept_source(found), where[-1]), self._where_of)
            return True

    def close(self) -> None:
        """Let go of the spooled lines (the recording is not written after this)."""
        self._spool.close()

    def __len__(self) -> int:
        """How many calls it holds: one for each context and key, as its file will."""
        with self._lock:
            return self._count()

    def _count(self) -> int:
        """The calls held, each once (a line as text wins over the same call's line kept: about never)."""
        return len(self._calls) + sum(1 for where in self._text if not self._holds(where))

    def _by_shard(self) -> dict[int, array[int]]:
        """Each call's number (as CallPlaces holds it), by its shard's number (a shard that holds only
        lines as text among them)."""
        calls: dict[int, array[int]] = {_shard(where): array("Q") for where in self._text}
        for number in self._calls.numbers():
            calls.setdefault(number % _SHARDS, array("Q")).append(number)
        return calls

    def _ordered(self, numbers: Iterable[int], shard: int | None = None) -> list[tuple[Where, Source]]:
        """Calls (numbers as CallPlaces holds them) with their Wheres, read back from their lines, and
        the lines made here as text (of `shard`, or all), in the recording's order; a line made here
        wins over one kept (a Where held both ways, as text and as kept)."""
        order: list[tuple[Where, Source]] = [
            (where, text) for where, text in self._text.items() if shard in (None, _shard(where))
        ]
        for number in numbers:
            where = self._where_of(number)
            if where not in self._text:
                order.append((where, _unpacked(number)[0]))
        order.sort(key=_first)
        return order

    def _chunks(self, order: list[tuple[Where, Source]], blocks: array[int]) -> Iterator[str | bytes]:
        """The recording's text, a line at a time: the calls in order, then every blob by id (a line
        UTF-8 cannot hold stays text, for atomic_write_chunks to refuse, naming its line)."""
        for _, source in order:
            yield self._raw(source)
            yield b"\n"
        for number in blocks:
            place = self._blobs.at(number)
            yield self._raw(place) if place is not None else self._kept_blob(number)
            yield b"\n"

    def _raw(self, source: Source) -> str | bytes:
        """A line without its "\\n": the recording's line kept, or the spool's."""
        kept = _kept_line(source)
        if kept is not None:
            assert self._recorded is not None
            return line_safe(self._recorded.line(kept))
        return self._spool.get(source)

    def _kept_blob(self, number: int) -> str:
        assert self._recorded is not None
        blob = f"{number:016x}"
        return blob_line(blob, self._recorded.blobs[blob])

    def _line(self, source: Source) -> bytes:
        line = self._raw(source)
        return (line if isinstance(line, bytes) else line.encode("utf-8")) + b"\n"

    def _blob_bytes(self, number: int) -> bytes:
        place = self._blobs.at(number)
        if place is not None:
            return self._line(place)
        return (self._kept_blob(number) + "\n").encode("utf-8")

    def _write_shards(self, directory: Path, calls: dict[int, array[int]], blocks: array[int]) -> None:
        """The stage's calls as shards by key and its blocks as shards by id (pipeline.llm.recordings.shards),
        then its manifest, in one rename; beside each shard of calls, its table of items. What is held
        for it is 8 bytes a call (its number, by shard) and one shard's Wheres at a time: a
        million-call stage's (item, line) pairs and block ids as text were the recording run's peak,
        then its Wheres (issue 33)."""
        from pipeline.llm.recordings import item_table  # (it reads recordings with this module)

        before = set(os.listdir(directory))
        written: list[tuple[str, str]] = []
        tables: list[tuple[str, str]] = []  # each shard of calls' table of items, named last
        try:
            try:
                for prefix, (first, end) in block_shards(blocks, shards.SHARD_DIGITS):
                    chunks = (self._blob_bytes(blocks[at]) for at in range(first, end))
                    written.append(shards.write_shard(directory, "blocks", prefix, chunks))
                for number in sorted(calls):
                    order = self._ordered(calls.pop(number), number)
                    lines = ((where[1], self._line(source)) for where, source in order)
                    prefix = f"{number:0{shards.SHARD_DIGITS}x}"
                    shard, table = item_table.write_calls(directory, prefix, lines)
                    written.append(shard)
                    tables.append(table)
            except UnicodeEncodeError as exc:  # as atomic_write_chunks refuses it for one file
                raise UnwritableTextError(
                    f"{directory / CALLS_FILE}: not written: a call would hold a lone surrogate "
                    f"(\\u{ord(exc.object[exc.start]):04x}, half a character, which no UTF-8 file can hold), "
                    "so no reader could read it back. Fix: find the input it came from (a JSON or YAML "
                    "escape \\ud800 to \\udfff), write the character itself there, and run again; the old "
                    "recording is unchanged"
                ) from None
            written += tables
            shards.commit(directory / CALLS_FILE, written)
        except BaseException:
            # The old manifest still stands: the shards written for the new one go, so that the old
            # recording reads as it was (a killed writer leaves them, refused as strays until the next write).
            for name, _ in {*written, *tables}:
                if name not in before:
                    (directory / name).unlink(missing_ok=True)
            (directory / shards.JOURNAL).unlink(missing_ok=True)  # what it listed is gone, or named
            raise
        shards.drop_unnamed(directory, {name for name, _ in written})

    def write(self, directory: Path, keep: Callable[[RecordedCall], bool] | None = None) -> int:
        """Write the stage's calls in one step, streamed from the spool in their sorted order (the
        same bytes as when the file was held whole); how many calls the file holds. keep=None: they
        replace the recording (a pipeline stage's run). Otherwise the calls already recorded that
        `keep` accepts stay beside them (read and verified under the folder's lock, so concurrent
        writers lose nothing)."""
        refuse_linked(directory)
        with locked(directory):
            if keep is not None:
                earlier = (
                    [loaded.call for loaded in read_stage(directory)] if has_recording(directory) else []
                )
                for call in earlier:
                    if keep(call):
                        self.add(call)
            with self._lock:
                count = self._count()
                # Each call's number by shard, 8 bytes a call; a small stage's calls in order.
                calls = self._by_shard() if count > shards.SHARD_AT else {}
                order = [] if calls else self._ordered(self._calls.numbers())
                kept_blobs: set[int] = set()
                if self._recorded is not None:
                    for number in self._calls.numbers():
                        index = _kept_line(_unpacked(number)[0])
                        if index is not None:
                            kept_blobs.update(map(BlockLines.number, blob_refs(self._recorded.line(index))))
                blocks = self._blobs.numbers(kept_blobs)
                del kept_blobs
            # A temporary file here now is a killed writer's: every live writer waits for the lock.
            for pattern in (
                f".{CALLS_FILE}.*{TMP_SUFFIX}",
                f".calls-*{TMP_SUFFIX}",
                f".blocks-*{TMP_SUFFIX}",
                f".items-*{TMP_SUFFIX}",
            ):
                for stale in directory.glob(pattern):
                    stale.unlink(missing_ok=True)
            shards.clear_killed_writer(directory, holding_lock=True)  # its shards, named in a warning
            if count > shards.SHARD_AT:
                self._write_shards(directory, calls, blocks)
            else:
                atomic_write_chunks(directory / CALLS_FILE, self._chunks(order, blocks))
                shards.drop_unnamed(directory, set())  # a sharded recording before: its shards
            with contextlib.suppress(FileNotFoundError):  # its blocks are in calls.jsonl now
                (directory / LEGACY_BLOBS_FILE).unlink()
            return count


def _shard(where: Where) -> int:
    """The number of the shard a call of this Where is written to (shards.shard_of its key)."""
    return int(shards.shard_of(where[-1]), 16)


def _first(pair: tuple[Where, Source]) -> Where:
    return pair[0]


def write_stage(
    directory: Path, calls: Iterable[RecordedCall], keep: Callable[[RecordedCall], bool] | None = None
) -> None:
    """Write one stage's calls (see StageRecording.write for `keep`)."""
    recording = StageRecording()
    for call in calls:
        recording.add(call)
    recording.write(directory, keep)


def has_recording(directory: Path) -> bool:
    return (directory / CALLS_FILE).is_file()


def is_blob(entry: Any) -> bool:
    return isinstance(entry, dict) and "blob" in entry


@dataclass(frozen=True)
class RecordingLines:
    """A stage's recording split into its parts: the call lines (with their numbers) and the blobs,
    and every line that is neither, for the tolerant readers to report."""

    path: Path
    calls: list[tuple[int, str]]
    blobs: Mapping[str, str]
    problems: list[str]
    # A sharded recording (pipeline.llm.recordings.shards): each shard file with the number its first
    # line has in `calls`' numbering, which runs on from shard to shard.
    sources: tuple[tuple[int, Path], ...] = ()
    # Each file read, by name, with the sha256 of its bytes, in order: what the verified memo's digest
    # covers (pipeline.llm.recordings.verified_memo); empty for a recording put together otherwise.
    hashes: tuple[tuple[str, str], ...] = ()

    def located(self, number: int) -> tuple[Path, int]:
        """The file and line of a line numbered `number` here."""
        if not self.sources:
            return self.path, number
        at = bisect.bisect_right([first for first, _ in self.sources], number) - 1
        first, path = self.sources[max(at, 0)]
        return path, number - first + 1

    def where(self, number: int) -> str:
        path, line = self.located(number)
        return f"{path}:{line}"


MAX_RECORDING_BYTES = 4 * 2**30  # tens of thousands of calls with log-probabilities fit many times


def recording_text(path: Path, data: bytes | None = None) -> str:
    """A recording file as text (its bytes `data` when already read); CorruptRecordError, naming
    the file (and line) and the fix, for one that is too large to be a recording or is not UTF-8."""
    fix = f"Fix: restore the file from git (git checkout -- {path}), or re-record the stage."
    size = path.stat().st_size if data is None else len(data)
    if size > MAX_RECORDING_BYTES:
        raise CorruptRecordError(f"{path}: {size / 2**30:.1f} GiB, more than a recording holds. {fix}")
    if data is None:
        data = path.read_bytes()
    if (long := long_line(data)) is not None:
        raise CorruptRecordError(
            f"{path}:{long}: longer than {MAX_LINE_BYTES:,} bytes, more than a call. {fix}"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise CorruptRecordError(f"{path}:{line}: byte 0x{data[exc.start]:02x} is not UTF-8. {fix}") from None


def split_recording(directory: Path, files: dict[str, bytes] | None = None) -> RecordingLines:
    """Read a stage's recording: calls.jsonl (and a blobs.jsonl beside it, from before they were one
    file; or the shards it names, pipeline.llm.recordings.shards), every blob checked against its id.
    Bad lines are listed, not raised. `files`: the folder's files as already read (and checked
    against the folder's pin, pipeline.llm.recordings.pins), to parse those bytes rather than read
    the files again."""
    refuse_linked(directory)
    path = directory / CALLS_FILE
    first = recording_text(path, None if files is None else files.get(CALLS_FILE))
    if files is not None:
        return _split_text(directory, first, files)
    try:
        return _split_text(directory, first, None)
    except shards.RACES:
        # A writer may have replaced the manifest and its shards between two reads: once more.
        return _split_text(directory, recording_text(path), None)


def _split_text(directory: Path, first: str, files: dict[str, bytes] | None) -> RecordingLines:
    """split_recording of a recording whose calls.jsonl reads `first`."""
    names = list(files) if files is not None else os.listdir(directory)
    if shards.is_manifest(first):
        return _split_shards(directory, first, files, names)
    shards.refuse_strays(directory, names, set())
    path = directory / CALLS_FILE
    given = files if files is not None else {}
    calls: list[tuple[int, str]] = []
    blobs: dict[str, str] = {}
    problems: list[str] = []
    sources = [(path, first)]
    legacy = directory / LEGACY_BLOBS_FILE
    if LEGACY_BLOBS_FILE in given or (files is None and legacy.is_file()):
        sources.append((legacy, recording_text(legacy, given.get(LEGACY_BLOBS_FILE))))
    for source, text in sources:
        holds_calls = source == path  # once a file, not once a line
        for number, line in enumerate(file_lines(text), start=1):
            if holds_calls and not line.startswith('{"blob":'):
                calls.append((number, line))
                continue
            if (blob := blob_entry(line, f"{source}:{number}", problems)) is not None:
                blobs[blob[0]] = blob[1]
    hashes = tuple((source.name, _sha256(text)) for source, text in sources)
    return RecordingLines(path, calls, blobs, problems, hashes=hashes)


def _split_shards(
    directory: Path, manifest: str, files: dict[str, bytes] | None, names: list[str]
) -> RecordingLines:
    """split_recording of a sharded recording: every shard its manifest names, checked against its
    hash, its calls numbered on from the shard before."""
    path = directory / CALLS_FILE
    named = shards.parse_manifest(path, manifest)
    shards.refuse_strays(directory, names, {name for name, _ in named})
    calls: list[tuple[int, str]] = []
    blobs: dict[str, str] = {}
    problems: list[str] = []
    sources: list[tuple[int, Path]] = []
    offset = 0
    for name, sha in named:
        shard = directory / name
        lines = file_lines(recording_text(shard, shards.shard_bytes(directory, name, sha, files)))
        sources.append((offset + 1, shard))
        holds_calls = name.startswith("calls-")
        for number, line in enumerate(lines, start=1):
            if holds_calls and not line.startswith('{"blob":'):
                calls.append((offset + number, line))
            elif (blob := blob_entry(line, f"{shard}:{number}", problems)) is not None:
                blobs[blob[0]] = blob[1]
        offset += len(lines)
    hashes = ((CALLS_FILE, _sha256(manifest)), *named)
    return RecordingLines(path, calls, blobs, problems, tuple(sources), hashes)


def _sha256(text: str) -> str:
    """sha256 of the bytes a file decoded to `text` held (strict UTF-8 decodes one way only)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def blob_entry(line: str, where: str, problems: list[str]) -> tuple[str, str] | None:
    """A blob line's id and text (noting in `problems` one that does not hash to its id); None, noted,
    for a line that is not a blob line."""
    try:
        entry = orjson.loads(line)
        blob, content = entry["blob"], entry["text"]
        if not isinstance(blob, str) or not isinstance(content, str):
            raise TypeError("blob and text must be strings")
    except (ValueError, KeyError, TypeError) as exc:
        problems.append(f"{where}: not a blob line ({exc})")
        return None
    if blob_id(content) != blob:
        # Kept: a call that uses it then fails record.problem() too, as a request edited.
        problems.append(f"{where}: blob {blob} does not hash to its id (edited)")
    return blob, content


@dataclass(frozen=True)
class LoadedCall:
    path: Path
    line: int
    call: RecordedCall


def parse_call_line(
    line: str, blobs: Mapping[str, str], where: str, *, verified: bool = False
) -> RecordedCall:
    """One call line, its blobs restored; not yet verified (see CallRecord.problem). `verified`: these
    very characters were parsed and verified before (a StageIndex's line, served), so their depth is
    known to be within bounds and is not walked again; its messages' layout is then kept for the
    local cache's seed (pipeline.llm.recordings.layouts)."""
    try:
        raw = orjson.loads(line)
        # Before anything walks it (pipeline.llm.bounds); a line with no more openings than the
        # limit cannot nest past it (each object or array opens with one), so is not walked.
        if not verified and _may_nest_past(line) and (deep := depth_problem(raw)) is not None:
            raise ValueError(deep)
        context = CallContext.model_validate(raw.pop("context"))
        layout: list[Laid] | None = [] if verified else None
        for message in raw["request"]["messages"]:
            message["content"] = unpack_content(message["content"], blobs, where, layout)
        call = RecordedCall(context=context, record=CallRecord.model_validate(raw))
        if layout is not None:
            layouts.SERVED.put(call.record.request, layout)
        return call
    except CorruptRecordError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CorruptRecordError(
            f"{where}: not a recorded call ({_why(exc)}). Fix: restore the file from git "
            f"(git checkout -- {where.rsplit(':', 1)[0]}), or re-record the stage."
        ) from exc


def _may_nest_past(line: str, limit: int = MAX_DEPTH) -> bool:
    """Whether a JSON line could hold values nested deeper than `limit`: not when it holds no more
    than `limit` of "{" and "[" (every object and array opens with one; those inside strings only
    add to the count)."""
    return line.count("{") + line.count("[") > limit


def _why(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'the line'}: {e['msg']}"
            for e in exc.errors(include_url=False)[:2]
        )
    if isinstance(exc, KeyError):
        return f"{exc} is missing"
    return str(exc)


def trusted_call(line: str, parts: RecordingLines, number: int) -> RecordedCall:
    """One call line parsed and verified (key re-derived, checksum), under today's key recipe;
    CorruptRecordError naming the file and line when it cannot be trusted."""
    where = parts.where(number)
    call = parse_call_line(line, parts.blobs, where)
    problem = call.record.problem()
    if problem is not None:
        raise CorruptRecordError(
            f"{where}: call {call.record.key} cannot be trusted: {problem}. "
            f"Fix: restore the file from git (git checkout -- {where.rsplit(':', 1)[0]}), "
            "or re-record this call."
        )
    # A verified call written under an older key recipe is served under today's key.
    return call.current()


def whole_recording(directory: Path, files: dict[str, bytes] | None, verify: bool) -> RecordingLines:
    """split_recording, and CorruptRecordError at its first bad blob line when `verify`."""
    parts = split_recording(directory, files)
    if parts.problems and verify:
        raise CorruptRecordError(
            f"{parts.problems[0]}. Fix: restore the file from git (git checkout -- {directory}), "
            "or re-record the stage."
        )
    return parts


def read_stage(
    directory: Path,
    *,
    verify: bool = True,
    files: dict[str, bytes] | None = None,
    memo: VerifiedMemo | None = None,
) -> Iterator[LoadedCall]:
    """A stage's calls; CorruptRecordError at the first line that cannot be read or trusted.
    `files`: the folder's files as already read (see split_recording). Content verified in full
    before (in this process, or as `memo` remembers) is parsed but its records not verified again
    (pipeline.llm.recordings.verified_memo); content verified in full now is remembered."""
    if not (has_recording(directory) if files is None else CALLS_FILE in files):
        return
    parts = whole_recording(directory, files, verify)
    memo = memo or IN_PROCESS
    unverified = memo.holds(parts) if verify else None
    for number, line in parts.calls:
        if unverified is not None:
            yield LoadedCall(*parts.located(number), trusted_call(line, parts, number))
            continue
        call = parse_call_line(line, parts.blobs, parts.where(number))
        yield LoadedCall(*parts.located(number), call.current() if verify else call)
    if unverified is not None:
        memo.remember(unverified)


def read_keys(
    directory: Path, keys: Collection[str], *, verify: bool = True, scan_whole: bool = True
) -> Iterator[LoadedCall]:
    """The calls of `keys` in a stage's recording (verified as read_stage verifies them). A sharded
    recording (pipeline.llm.recordings.shards) is read as its manifest, the shards of those keys'
    calls, each checked against its hash, and the blocks their lines refer to, each found where it
    lies and checked against its id (pipeline.llm.recordings.block_places; a block not found so: its
    shard read whole, checked against its hash), the folder checked for strays: a reader of one call
    of a million reads a sixteenth of the calls and a few kB of blocks, and parses that call's line
    only. A recording in one file is read whole, its calls filtered, as is a sharded one whose lines
    do not show these keys as written (a line under an older key recipe).

    `scan_whole=False`: a key whose line does not show it as written is taken as not recorded here,
    and a recording in one file has only the lines that show a key parsed. For a reader that asks
    every stage for a key most of them do not hold (audit --key, which reads unverified, so a line
    under an older recipe keeps its old key to it anyway)."""
    if not has_recording(directory):
        return
    refuse_linked(directory)
    wanted = set(keys)
    with (directory / CALLS_FILE).open("rb") as opening:  # a manifest, or the calls in one file?
        sharded = shards.is_manifest(opening.read(len(shards.MANIFEST_OPENING)).decode("utf-8", "replace"))
    if sharded:
        manifest = recording_text(directory / CALLS_FILE)
        found = _key_lines(directory, manifest, wanted, verify=verify, complete=scan_whole)
    else:
        found = None if scan_whole else _file_key_lines(directory, wanted, verify)
    if found is None:
        yield from (
            loaded for loaded in read_stage(directory, verify=verify) if loaded.call.record.key in wanted
        )
        return
    lines, parts = found
    for shard, number, line in lines:
        if verify:
            call = trusted_call(line, RecordingLines(shard, [], parts.blobs, []), number)
        else:
            call = parse_call_line(line, parts.blobs, f"{shard}:{number}")
        if call.record.key in wanted:
            yield LoadedCall(shard, number, call)


Found = tuple[list[tuple[Path, int, str]], RecordingLines]


def _key_lines(
    directory: Path, manifest: str, wanted: set[str], *, verify: bool = True, complete: bool = True
) -> Found | None:
    """The lines of `wanted` keys in a sharded recording (shard, line number, line), with the blocks
    they refer to; None when a key is not found as written and `complete` (then the reader reads the
    whole)."""
    named = shards.parse_manifest(directory / CALLS_FILE, manifest)
    shards.refuse_strays(directory, os.listdir(directory), {name for name, _ in named})
    marks = _marks(wanted)
    lines: list[tuple[Path, int, str]] = []
    needed = {("calls", shards.shard_of(key)) for key in wanted}
    for name, sha in named:
        if shards.prefix_of(name) in needed:  # searched as bytes, only the lines found decoded
            data = shards.shard_bytes(directory, name, sha, None)
            for number, held in _lines_holding(data, [mark.encode("utf-8") for mark in marks]):
                lines.append((directory / name, number, _decoded(held, f"{directory / name}:{number}")))
    if complete and len(lines) < len(wanted):
        return None
    refs = {blob for _, _, line in lines for blob in blob_refs(line)}
    blocks = {("blocks", shards.shard_of(blob)) for blob in refs}
    chosen = [(name, sha) for name, sha in named if shards.prefix_of(name) in blocks]
    blobs: dict[str, str] = {}
    problems: list[str] = []
    from pipeline.llm.recordings.block_places import placed_blocks  # (it reads lines as this module does)

    for name, sha in chosen:  # each block found where it lies, else its shard read whole, one at a time
        if placed_blocks(directory / name, _in_shard(refs, name), blobs, problems):
            continue
        data = shards.shard_bytes(directory, name, sha, None)
        if not _blocks_opening(directory / name, data, _in_shard(refs, name), blobs, problems):
            # a block line not as written: those shards parsed whole
            files = {name: shards.shard_bytes(directory, name, sha, None) for name, sha in chosen}
            files[CALLS_FILE] = shards.manifest_text(chosen).encode("utf-8")  # the part of it read
            return lines, whole_recording(directory, files, verify=verify)
    return lines, _found_blocks(directory / CALLS_FILE, blobs, problems, verify)


def _file_key_lines(directory: Path, wanted: set[str], verify: bool) -> Found:
    """The lines of `wanted` keys in a recording in one file, as written, with the blocks they
    refer to: the file is searched as bytes, and only those lines decoded, parsed and checked."""
    names = os.listdir(directory)
    path = directory / CALLS_FILE
    if LEGACY_BLOBS_FILE in names or path.stat().st_size > MAX_RECORDING_BYTES:
        parts = whole_recording(directory, None, verify)  # (which says what is wrong with a large one)
        marks = _marks(wanted)
        return [(parts.path, n, line) for n, line in parts.calls if any(m in line for m in marks)], parts
    shards.refuse_strays(directory, names, set())
    data = path.read_bytes()
    held = _lines_holding(data, [mark.encode("utf-8") for mark in _marks(wanted)])
    lines = [(path, number, _decoded(line, f"{path}:{number}")) for number, line in held]
    refs = {blob for _, _, line in lines for blob in blob_refs(line)}
    blobs: dict[str, str] = {}
    problems: list[str] = []
    from pipeline.llm.recordings.block_places import block_lines_start, placed_blocks

    if not placed_blocks(path, refs, blobs, problems, block_lines_start(data)) and not _blocks_opening(
        path, data, refs, blobs, problems
    ):
        return lines, whole_recording(directory, None, verify)
    return lines, _found_blocks(path, blobs, problems, verify)


def _lines_holding(data: bytes, marks: Iterable[bytes]) -> list[tuple[int, bytes]]:
    """The lines of `data` (numbered from 1) that hold one of `marks`, found without splitting it."""
    starts: set[int] = set()
    for mark in marks:
        at = data.find(mark)
        while at >= 0:
            starts.add(data.rfind(b"\n", 0, at) + 1)
            end = data.find(b"\n", at)
            at = -1 if end < 0 else data.find(mark, end)
    return [(data.count(b"\n", 0, start) + 1, _line_at(data, start)) for start in sorted(starts)]


def _line_at(data: bytes, start: int) -> bytes:
    end = data.find(b"\n", start)
    return data[start:] if end < 0 else data[start:end]


def _decoded(line: bytes, where: str) -> str:
    """One line read out of a recording, refused as recording_text refuses a file's lines."""
    fix = (
        f"Fix: restore the file from git (git checkout -- {where.rsplit(':', 1)[0]}), or re-record the stage."
    )
    if len(line) > MAX_LINE_BYTES:
        raise CorruptRecordError(f"{where}: longer than {MAX_LINE_BYTES:,} bytes, more than a call. {fix}")
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptRecordError(f"{where}: byte 0x{line[exc.start]:02x} is not UTF-8. {fix}") from None


def _in_shard(blobs: set[str], name: str) -> set[str]:
    return {blob for blob in blobs if shards.prefix_of(name) == ("blocks", shards.shard_of(blob))}


def _blocks_opening(
    source: Path, data: bytes, wanted: set[str], blobs: dict[str, str], problems: list[str]
) -> bool:
    """Add to `blobs` the blocks `wanted` from a file's bytes, each found by the opening its line is
    written with (`{"blob":"<id>",` at a line's start: a quote inside a JSON string is escaped, so
    only a block line opens so) and checked against its id as split_recording checks every block
    (noting in `problems` one that fails); False when one is not found so (a line not as written:
    the reader then parses the file whole)."""
    for blob in wanted:
        opening = b'{"blob":"' + blob.encode("ascii") + b'",'
        start = 0 if data.startswith(opening) else data.find(b"\n" + opening) + 1
        if start == 0 and not data.startswith(opening):
            return False
        number = data.count(b"\n", 0, start) + 1
        where = f"{source}:{number}"
        if (entry := blob_entry(_decoded(_line_at(data, start), where), where, problems)) is not None:
            blobs[entry[0]] = entry[1]
    return True


def _found_blocks(path: Path, blobs: dict[str, str], problems: list[str], verify: bool) -> RecordingLines:
    if problems and verify:
        raise CorruptRecordError(
            f"{problems[0]}. Fix: restore the file from git (git checkout -- {path.parent}), "
            "or re-record the stage."
        )
    return RecordingLines(path, [], blobs, problems)


def _marks(keys: Iterable[str]) -> list[str]:
    return [f'"key":"{key}"' for key in keys]


def stage_dirs(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if has_recording(p))


def read_all(root: Path, *, verify: bool = True) -> Iterator[LoadedCall]:
    for directory in stage_dirs(root):
        stage_dir(root, directory.name)  # a folder name that is not a plain name, or a link out
        yield from read_stage(directory, verify=verify)
