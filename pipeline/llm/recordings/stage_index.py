"""A stage's recording held as the places of its lines, each call read and parsed only when it is
served (issues 31, 33).

stage_reader.read_stage builds every call of a recording (its prompts unpacked from the shared
blocks): at tens of thousands of calls, about 150 kB a call in memory, and most of a stage's fixed
cost when every recording is read for the model's identity. A StageIndex keeps a map of key ->
line and, for each line, its file, offset, length and digest (pipeline.llm.recordings.offsets):
about 40 bytes and the key, where keeping the packed lines cost 10-18 kB a call. It is built in one
pass that hashes every file (folder_scan: the pin, the shards' hashes and the memo's digest are
over the bytes placed), then every call line is read back through it and verified in full once
per content, each call dropped once checked, and its digest remembered
(pipeline.llm.recordings.verified_memo); content the memo holds is only scanned for its keys and
models (orjson, no call built). A lookup reads one line from its file, checks it against its
digest (the bytes verified or scanned, or it is refused) and parses it. Nothing of a recording
that fails is served: a bad line anywhere raises, naming its file and line, and the stage is left
out whole.

The same scan serves `audit --item` (read_items): each line is read for its context's item only,
and that item's calls are parsed.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any

import orjson

from pipeline.errors import CorruptRecordError
from pipeline.llm.blocks import Laid
from pipeline.llm.keys import KEY_RECIPE, canonical_json
from pipeline.llm.recordings import (
    layouts,
    line_checks,
    line_format,
    line_search,
    shards,
    stage_folders,
    stage_reader,
)
from pipeline.llm.recordings.block_places import block_lines_start, placed_blocks, sharded_blocks
from pipeline.llm.recordings.folder_scan import scan_folder
from pipeline.llm.recordings.key_places import places
from pipeline.llm.recordings.offsets import LazyBlobs, LineTable
from pipeline.llm.recordings.pins import Pins
from pipeline.llm.recordings.verified_memo import IN_PROCESS, VerifiedMemo, files_digest
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import CallContext, ChatRequest


def _context_item(line: str) -> str | None:
    """The item a call line's context names, read from its JSON alone (None: not readable so)."""
    try:
        return _item_of(orjson.loads(line))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _item_of(raw: Any) -> str | None:
    item = raw["context"].get("item", "")
    return item if isinstance(item, str) else None


def read_items(directory: Path, items: Collection[str]) -> Iterator[stage_reader.LoadedCall]:
    """The calls of `items` in a stage's recording, unverified (read_stage(verify=False), for audit):
    the other lines are only scanned for their context's item, not parsed, so the calls of one item
    in a large recording cost a JSON read of each line. A line that cannot be scanned is parsed, and
    so named if damaged. A recording whose lines open as the writer writes them is searched as bytes
    for the items as written instead, and only those lines and their blocks are read (_placed_items)."""
    if not stage_folders.has_recording(directory):
        return
    found = _placed_items(directory, set(items))
    if found is not None:
        yield from found
        return
    parts = stage_reader.split_recording(directory)
    wanted = set(items)
    for number, line in parts.calls:
        item = _context_item(line)
        if item is None or item in wanted:
            call = line_checks.parse_call_line(line, parts.blobs, parts.where(number))
            if call.context.item in wanted:
                yield stage_reader.LoadedCall(*parts.located(number), call)


CALL_OPENING = line_search.CALL_OPENING  # how the writer opens every call line
BLOCK_OPENING = line_search.BLOCK_OPENING  # and every block line
Lines = list[tuple[Path, int, str]]  # a file, a line's number there, the line


def _placed_items(directory: Path, wanted: set[str]) -> list[stage_reader.LoadedCall] | None:
    """read_items without parsing every line: the recording's call lines searched as bytes for each
    item as the writer writes it in a line's context (`"item":"903"`: a quote inside a JSON string
    is escaped, so only the JSON's own keys read so), and for a line that may spell it otherwise
    (escapes, whitespace: line_search.lines_found, whose JSON is then read for its item), only those
    lines decoded and parsed, and only their blocks read. A sharded recording
    (pipeline.llm.recordings.shards): every shard of calls read and checked against its hash in the
    manifest, the blocks found where they lie (pipeline.llm.recordings.block_places), not with their
    shards read whole. A recording in one file: its blocks found by their lines' openings, as
    read_keys finds them. None for a recording holding a line not opened as the writer opens one
    (then read_items reads it whole, as before)."""
    if "" in wanted:
        return None  # a context without an item is written without one: nothing to search for
    path = directory / stage_folders.CALLS_FILE
    stage_folders.refuse_linked(directory)
    with path.open("rb") as opening:
        head = opening.read(len(shards.MANIFEST_OPENING)).decode("utf-8", "replace")
    marks = [line_format.line_safe(canonical_json({"item": item}))[1:-1].encode("utf-8") for item in wanted]
    lines: Lines | None
    blobs: dict[str, str] | None
    if shards.is_manifest(head):
        named = shards.parse_manifest(path, line_checks.recording_text(path))
        shards.refuse_strays(directory, os.listdir(directory), {name for name, _ in named})
        held = (
            (directory / name, shards.shard_bytes(directory, name, sha, None))
            for name, sha in named
            if shards.prefix_of(name)[0] == "calls"
        )  # one shard's bytes held at a time
        lines = _item_lines(held, marks, wanted)
        blobs = None if lines is None else sharded_blocks(directory, named, _refs(lines))
    else:
        names = os.listdir(directory)
        if stage_folders.LEGACY_BLOBS_FILE in names or path.stat().st_size > line_checks.MAX_RECORDING_BYTES:
            return None  # read whole, which says what is wrong with a large one
        shards.refuse_strays(directory, names, set())
        data = path.read_bytes()
        lines = _item_lines([(path, data)], marks, wanted)
        blobs = {}
        refs = set() if lines is None else _refs(lines)
        if lines is None or not (
            placed_blocks(path, refs, blobs, [], block_lines_start(data))
            or line_search.blocks_by_opening(path, data, refs, blobs, [])
        ):
            return None
    if lines is None or blobs is None:
        return None
    out = []
    for source, number, text in lines:
        call = line_checks.parse_call_line(text, blobs, f"{source}:{number}")
        if call.context.item in wanted:
            out.append(stage_reader.LoadedCall(source, number, call))
    return out


def _refs(lines: Lines) -> set[str]:
    return {blob for _, _, line in lines for blob in line_format.blob_refs(line)}


def _item_lines(files: Iterable[tuple[Path, bytes]], marks: list[bytes], wanted: set[str]) -> Lines | None:
    """The call lines of `files` that hold one of `marks` (or may spell an item otherwise and name one
    of `wanted`: line_search.lines_found), decoded; None for a file with a line that opens as neither
    a call line nor a block line."""
    lines: Lines = []
    sought: set[str | None] = {*wanted, None}  # (None: an item not read as a string: parsed, so named)
    for path, data in files:
        count = data.count(b"\n") + (bool(data) and not data.endswith(b"\n"))
        start = block_lines_start(data) or len(data)  # (only block lines, or none: searched whole)
        before = data.startswith(CALL_OPENING) + data.count(b"\n" + CALL_OPENING, 0, start)
        after = data.count(b"\n" + CALL_OPENING, start)
        if before + after + data.startswith(BLOCK_OPENING) + data.count(b"\n" + BLOCK_OPENING) != count:
            return None
        end = start if after == 0 else len(data)  # where its call lines end: only block lines after
        found = line_search.lines_found(data, marks, "item", lambda raw: _item_of(raw) in sought, end)
        for number, held in found:
            if not held.startswith(BLOCK_OPENING):
                lines.append((path, number, line_checks.decoded_line(held, f"{path}:{number}")))
    return lines


Identity = tuple[str, str, str]  # a ModelIdentity's backend, name and digest


@dataclass(frozen=True)
class StageIndex:
    """A stage's recording, verified in full, kept as the places of its lines: today's key -> the
    line of its first call, read from its file (checked against its digest) and parsed only when that
    call is served (issue 33). A lookup or an identity costs no parse of the calls nobody asks for,
    and memory about 40 bytes a line beside the key, whatever the calls hold."""

    lines: LineTable  # the call lines, in the recording's order
    blobs: LazyBlobs  # the shared blocks by id, read when a served line refers to them
    # A key recorded in three or more contexts (`repeats`), by its first line: where verbatim_at looks
    # first, the line after the one it found last. A replay asks a key's contexts in the recording's
    # order, so each is found at the first look, not after reading again every line before it (n²/2
    # lines for n contexts). Only where to start: every line is still asked, whatever this holds.
    _resume: dict[int, int] = field(default_factory=dict, init=False, compare=False, repr=False)
    at: Mapping[str, int]  # key -> index in `lines` (a KeyPlaces: pipeline.llm.recordings.key_places)
    models: frozenset[Identity]
    # A key's later lines, where it was recorded more than once (the same prompt in another context:
    # a refinement round that asks again what an earlier one asked), for verbatim_at.
    repeats: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    # Each file's name and sha256 as scanned, and whether the recording is one file laid out as the
    # writer lays one out (folder_scan.ScannedRecording.as_written): for StageCalls.unchanged.
    hashes: tuple[tuple[str, str], ...] = ()
    as_written: bool = False
    block_ids: str = ""
    # The call lines that open as a canonical line opens (checksum, then context) with another checksum
    # or context than they hold (`_misopened`): never found by their opening (`_opening`). Empty but
    # for a recording made to mislead.
    misopened: frozenset[int] = frozenset()

    def __len__(self) -> int:
        return len(self.at)

    def line(self, found: int) -> str:
        """The call line at `found`, as it was verified (CorruptRecordError if its file changed since)."""
        return self.lines.text(found)

    def verbatim_at(self, call: RecordedCall) -> int | None:
        """The index (in `lines`) of the line that records this very call, its context and record
        equal; None when none does. A replay writes it as it was read instead of packing the call's
        prompts into blocks again (ten times a hit's cost): the same call gives the same line
        (canonical JSON, content-defined blocks), and a line written by an earlier judgeloop in
        another form stays as it was.

        Found without parsing the line: a canonical line opens with its checksum, then its context
        (keys sorted), and the line was verified (its checksum covers its record), so a line that
        opens with the served record's checksum and this call's context records this very call,
        unless it names either again further on (a parse, verification's too, reads the last one:
        `misopened`). A line in another form, or such a line, with the same checksum, is parsed and
        compared. Every line of the call's key is asked, first to last: a key recorded in several
        contexts (a prompt asked again in a later round) has a line for each, and a call matched by
        none is packed anew."""
        found = self.at.get(call.record.key)
        if found is None:
            return None
        opened, others = self._opening(found, call.record.key, call.record.checksum, call.context)
        if opened is not None:
            return opened
        count = len(self.repeats.get(call.record.key, ())) + 1
        for at, candidate, line in others:
            same = line_checks.parse_call_line(line, self.blobs, self.lines.where(candidate))
            if same.record == call.record and same.context == call.context:
                return self._found(found, at, count, candidate)
        return None

    def kept_at(self, key: str, checksum: str, context: CallContext) -> int | None:
        """The index of the line that records the call of this key, context and record checksum, found
        by its opening alone as verbatim_at finds one (a verified canonical line that opens with the
        checksum and the context records that very call), for a caller that holds no record (a stage
        serving a call it adopts: LLMSession.serve). None where no line opens so: verbatim_at, given
        the record, may still find one in another form."""
        found = self.at.get(key)
        return None if found is None else self._opening(found, key, checksum, context)[0]

    def _opening(
        self, found: int, key: str, checksum: str, context: CallContext
    ) -> tuple[int | None, list[tuple[int, int, str]]]:
        """The key's line (from `found`, its first) that opens with the checksum and context, and the
        others that hold the checksum elsewhere (each its place among the key's lines, its index,
        its text), which only a parse can settle."""
        opening = _opening_of(checksum, context.model_dump(mode="json", exclude_defaults=True))
        later = self.repeats.get(key, ())
        count, start = len(later) + 1, self._resume.get(found, 0)
        others: list[tuple[int, int, str]] = []
        for step in range(count):
            at = (start + step) % count  # 0: the key's first line, else its later ones
            candidate = later[at - 1] if at else found
            line = self.line(candidate)
            if candidate not in self.misopened and line_format.line_safe(line).startswith(opening):
                return self._found(found, at, count, candidate), []
            if f'"checksum":"{checksum}"' in line:
                others.append((at, candidate, line))
        return None, others

    def _found(self, first: int, at: int, count: int, candidate: int) -> int:
        if count > 2:  # (a key in two contexts, the most common, costs a line more at most: not kept)
            self._resume[first] = (at + 1) % count
        return candidate

    def call_at(self, found: int) -> RecordedCall:
        """The recorded call of the line at `found`, parsed from the bytes that were verified."""
        line = self.line(found)
        return line_checks.parse_call_line(line, self.blobs, self.lines.where(found), verified=True).current()

    def call(self, key: str, request: ChatRequest | None = None, *, seed: bool = True) -> RecordedCall | None:
        """The recorded call of this key, parsed from the line that was verified (None: not here).
        The line's own key must be the one asked for: a place that names another line, however it
        came to, serves nothing. `request`: the request the caller derived `key` from (call_with);
        `seed`: whether the caller seeds a local cache with it (call_with)."""
        found = self.at.get(key)
        if found is None:
            return None
        call = None if request is None else self.call_with(found, key, request, seed=seed)
        if call is None:
            call = self.call_at(found)
        if call.record.key != key:
            raise CorruptRecordError(
                f"{self.lines.where(found)}: holds call {call.record.key}, not {key} as the recording's "
                "index placed it, so it is not served. Fix: run again (the recording is read anew)."
            )
        return call

    def checksum(self, key: str) -> str | None:
        """The checksum of the call `call(key)` serves, read from its line alone: the line read back
        and checked against its digest (as `call` reads it), parsed as JSON, no request rebuilt from
        its blocks and no model built. None where it is not here, or where only `call` can say (a
        line under an older key recipe, whose served record is re-keyed and sealed anew, or one
        that names another key: `call` refuses it, naming it)."""
        found = self.at.get(key)
        if found is None:
            return None
        try:
            raw = orjson.loads(self.line(found))
            if raw.get("recipe", KEY_RECIPE) != KEY_RECIPE or raw.get("key") != key:
                return None
            checksum = raw["checksum"]
        except (ValueError, KeyError, TypeError, AttributeError):
            return None  # not as the writer writes a line: `call` parses it, which names what is wrong
        return checksum if isinstance(checksum, str) else None

    def call_with(
        self, found: int, key: str, request: ChatRequest, *, seed: bool = True
    ) -> RecordedCall | None:
        """The recorded call of the line at `found`, for a caller holding `request`, from which it
        derived `key`: the line's request is not rebuilt from its blocks, which would read each one
        back from its file (about 14 us a block, ~24 blocks a judge call); the record is served
        with the caller's request instead. None where this does not apply (call_at then parses the
        line whole).

        Why that is the recorded call: the line's bytes are those verified (checked against their
        digest as they are read back), and verification derived the line's key from its request as
        the blocks rebuild it; `key` is today's key of that line, and the caller's request hashes to
        it, so its messages are the recorded ones (a 128-bit key over each message's text, as a hit
        in the local cache trusts it: pipeline.llm.cache.store). What the key spells loosely is
        compared as written: the request's fields besides its messages as canonical JSON (the key
        writes -0.0 as 0.0), each message's role and literal parts, and the length of its text. The
        messages' layout (each block's text cut from the caller's text by its length, taken when
        its line was checked against its id) is kept for the cache's seed, as a parse keeps it;
        `seed` False (a caller with no local cache: a dry run, issue 33) checks the same and keeps
        none, cutting no text."""
        line = self.line(found)
        try:
            raw = orjson.loads(line)
            if raw.get("recipe", KEY_RECIPE) != KEY_RECIPE or raw.get("key") != key:
                return None
            fields = raw["request"]
            layout = _laid_out(fields.pop("messages"), request, self.blobs, keep=seed)
            if layout is None or canonical_json(fields) != _request_fields(request):
                return None
            context = CallContext.model_validate(raw.pop("context"))
            call = RecordedCall(
                context=context, record=CallRecord.model_validate({**raw, "request": request})
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return None  # not as the writer writes a line: parsed whole, which names what is wrong
        if seed:
            layouts.SERVED.put(call.record.request, layout)
        return call

    def every_call(self) -> Iterator[RecordedCall]:
        """Every call line's call, each read and parsed when reached: each file's in its order, the
        files' merged by item, so that an item's blocks are read back once (LineTable.by_item)."""
        for found, line in self.lines.by_item():
            where = self.lines.where(found)
            yield line_checks.parse_call_line(line, self.blobs, where, verified=True).current()


def _request_fields(request: ChatRequest) -> str:
    """A request's fields besides its messages, as a recording line writes them (canonical JSON)."""
    return canonical_json(request.model_dump(mode="json", exclude={"messages"}))


def _laid_out(
    messages: list[Any], request: ChatRequest, blobs: LazyBlobs, *, keep: bool = True
) -> list[Laid] | None:
    """Each of the line's messages laid out over the caller's message of the same place (its literal
    parts as written, each block its text's length of the caller's text), as unpack_content lays a
    message out; None where they do not line up (another count, role, part or length). `keep` False:
    the same checks, and each message's layout left empty (no block's text cut out)."""
    if len(messages) != len(request.messages):
        return None
    layout: list[Laid] = []
    for written, message in zip(messages, request.messages, strict=True):
        if written["role"] != message.role or len(written) != 2:
            return None
        laid = _message_laid(written["content"], message.content, blobs, keep)
        if laid is None:
            return None
        layout.append(laid)
    return layout


def _message_laid(parts: Any, content: str, blobs: LazyBlobs, keep: bool) -> Laid | None:
    """One message's layout (`parts` as the line writes them, over the caller's `content`), or None."""
    if isinstance(parts, str):
        return content if parts == content else None
    laid: list[str | tuple[str]] = []
    at = 0
    for part in parts:
        if isinstance(part, str):
            if not content.startswith(part, at):
                return None
            if keep:
                laid.append(part)
            at += len(part)
            continue
        chars = blobs.length(part["blob"]) if len(part) == 1 else None
        if chars is None:
            return None
        if keep:
            laid.append((content[at : at + chars],))
        at += chars
    return laid if at == len(content) else None


def _identity(model: Any) -> Identity:
    return (str(model["backend"]), str(model["name"]), str(model["digest"]))


def _indexed(line: str, blobs: LazyBlobs, where: str) -> tuple[str, Identity, Any]:
    """The key and model of a line whose content was verified in full before (the memo holds its
    digest): read from the JSON alone, no call built, and that JSON (None: not readable so). A line
    under an older key recipe is parsed, for its key under today's."""
    raw: Any = None
    try:
        raw = orjson.loads(line)
        if raw.get("recipe", KEY_RECIPE) == KEY_RECIPE and isinstance(raw["key"], str):
            return raw["key"], _identity(raw["model"]), raw
    except (ValueError, KeyError, TypeError, AttributeError):
        pass  # not as verified content reads: parsed in full below, which names what is wrong
    record = line_checks.parse_call_line(line, blobs, where).current().record
    return record.key, _identity(record.model.model_dump()), raw


def _opening_of(checksum: str, context: Any) -> str:
    """How a canonical call line of this checksum and context (as JSON) opens, in line_safe's form."""
    return line_format.line_safe(_opens(checksum, context))


def _opens(checksum: str, context: Any) -> str:
    return f'{{"checksum":"{checksum}","context":{canonical_json(context)},'


def _misopened(line: str, raw: Any) -> bool:
    """Whether the line opens as a canonical call line does, but with another checksum or context
    than it holds: JSON lets an object name a member twice, and a parse (verification's too) reads
    the last, so `{"checksum":A,"context":X,...,"checksum":B,...}` is verified as B's. StageIndex
    finds a line by its opening only where this is False (`_opening`). `raw`: the line as JSON, where
    read already."""
    if not line.startswith('{"checksum":'):
        return False  # opens otherwise: no opening `_opening` looks for can match it
    try:
        held = orjson.loads(line) if raw is None else raw
        own = _opens(held["checksum"], held["context"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return True
    if line.startswith(own):
        return False  # as the writer writes a line (then its line_safe form opens with own's too)
    safe = line_format.line_safe(own)
    return not line_format.line_safe(line[: len(safe)]).startswith(safe)  # (a char maps to 1 or more)


def index_stage(directory: Path, *, pins: Pins | None = None, memo: VerifiedMemo | None = None) -> StageIndex:
    """A stage's recording as a StageIndex; CorruptRecordError at the first line that cannot be read
    or trusted, as read_stage (LockMismatchError for a folder that does not match its pin in `pins`).
    Content the memo does not hold is verified line by line now (each call dropped once checked),
    and remembered; content it holds is only scanned for keys."""
    try:
        scanned = scan_folder(directory, pins)
    except shards.RACES:  # a writer replaced the manifest and its shards while they were read: once more
        scanned = scan_folder(directory, pins)
    lines, blobs = scanned.calls, scanned.blobs
    memo = memo or IN_PROCESS
    unverified = memo.holds_digest(files_digest(scanned.hashes))
    at: dict[str, int] = {}
    repeats: dict[str, list[int]] = {}
    models: set[Identity] = set()
    # An item's calls together, so that its blocks are read back once (LineTable.by_item): a key's
    # lines are in one file (the shards are cut by key), in its order, so its first line is kept.
    misopened: set[int] = set()
    for found, line in lines.by_item():
        if unverified is None:
            key, model, raw = _indexed(line, blobs, lines.where(found))
        else:
            place = stage_reader.RecordingLines(lines.files.paths[lines.file[found]], [], blobs, [])
            record = line_checks.trusted_call(line, place, lines.number[found]).record
            key, model, raw = record.key, _identity(record.model.model_dump()), None
        if _misopened(line, raw):
            misopened.add(found)
        if at.setdefault(key, found) != found:
            repeats.setdefault(key, []).append(found)
        models.add(model)
    if unverified is not None:
        memo.remember(unverified)
    if len(lines.starts) > 1:  # keys in the recording's order, as read line by line
        at = dict(sorted(at.items(), key=itemgetter(1)))
    again = {key: tuple(sorted(later)) for key, later in repeats.items()}
    hashes = tuple(scanned.hashes)
    written = (scanned.as_written, scanned.block_ids)
    return StageIndex(
        lines, blobs, places(at), frozenset(models), again, hashes, *written, frozenset(misopened)
    )
