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

How a line is found by its opening without a parse: line_openings; a line matched against the
request its caller holds: request_match. (`audit --item` reads a recording's items: item_reader.)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any

import orjson

from pipeline.errors import CorruptRecordError
from pipeline.llm.keys import KEY_RECIPE, canonical_json
from pipeline.llm.recordings import layouts, line_checks, line_format, line_openings, shards, stage_reader
from pipeline.llm.recordings.folder_scan import scan_folder
from pipeline.llm.recordings.key_places import places
from pipeline.llm.recordings.offsets import LazyBlobs, LineTable
from pipeline.llm.recordings.pins import Pins
from pipeline.llm.recordings.request_match import laid_out, request_fields
from pipeline.llm.recordings.verified_memo import IN_PROCESS, VerifiedMemo, files_digest
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import CallContext, ChatRequest

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
    # or context than they hold (line_openings.misopened): never found by their opening (`_opening`).
    # Empty but for a recording made to mislead.
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
        opening = line_openings.opening_of(checksum, context.model_dump(mode="json", exclude_defaults=True))
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
            layout = laid_out(fields.pop("messages"), request, self.blobs, keep=seed)
            if layout is None or canonical_json(fields) != request_fields(request):
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
        if line_openings.misopened(line, raw):
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
