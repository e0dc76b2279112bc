"""Recorded calls as text that travels with the experiment.

Why text, next to the diskcache: the SQLite file is not diffable, DVC re-uploads it whole on any
change, and two collaborators cannot merge it. Each stage therefore writes the calls it made to

    recordings/<stage>/calls.jsonl   one call per line: context, key, model, request, reply, when
    recordings/<stage>/blobs.jsonl   {"blob": id, "text": ...}, content shared by calls

Both are sorted (calls by context then key, blobs by hash) and written with canonical JSON, so the
same calls give the same bytes, a new call is a new line in a diff, and git merges two
collaborators' additions line by line. Any recording can seed an empty local cache, so a fresh
clone replays with no model.

Content repeated across calls (the transcript inside every judge prompt, the rubric) is stored
once: message text is cut into blocks of whole lines at content-defined boundaries (a line whose
CRC-32 is 0 mod 8 ends a block once the block has MIN_BLOCK characters), so the same transcript
yields the same blocks whatever prompt surrounds it. Blocks of MIN_BLOCK characters or more go to
blobs.jsonl; a message becomes a list of literal strings and {"blob": hash} references.
"""

from __future__ import annotations

import hashlib
import threading
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from pipeline.errors import CorruptRecordError
from pipeline.llm.keys import canonical_json
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import CallContext

MIN_BLOCK = 256
MAX_BLOCK = 8192
CALLS_FILE = "calls.jsonl"
BLOBS_FILE = "blobs.jsonl"

Part = str | dict[str, str]


def blob_id(text: str) -> str:
    # 64 bits of sha256: blob ids are only compared within one stage's blobs.jsonl, which checks
    # every blob against its id on read, and short ids keep the many references in calls small.
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def split_blocks(text: str) -> list[str]:
    blocks: list[str] = []
    current: list[str] = []
    size = 0
    for line in text.splitlines(keepends=True):
        current.append(line)
        size += len(line)
        boundary = zlib.crc32(line.encode("utf-8")) % 8 == 0
        if (boundary and size >= MIN_BLOCK) or size >= MAX_BLOCK:
            blocks.append("".join(current))
            current, size = [], 0
    if current:
        blocks.append("".join(current))
    return blocks


def pack_content(text: str, blobs: dict[str, str]) -> str | list[Part]:
    parts: list[Part] = []
    for block in split_blocks(text):
        if len(block) >= MIN_BLOCK:
            blob = blob_id(block)
            blobs[blob] = block
            parts.append({"blob": blob})
        elif parts and isinstance(parts[-1], str):
            parts[-1] += block
        else:
            parts.append(block)
    if len(parts) == 1 and isinstance(parts[0], str):
        return parts[0]
    return parts


def unpack_content(content: str | list[Any], blobs: dict[str, str], where: str) -> str:
    if isinstance(content, str):
        return content
    out: list[str] = []
    for part in content:
        if isinstance(part, str):
            out.append(part)
        elif part.get("blob") in blobs:
            out.append(blobs[part["blob"]])
        else:
            raise CorruptRecordError(
                f"{where}: refers to blob {part.get('blob')} which is not in {BLOBS_FILE}. "
                "Fix: restore the stage's blobs.jsonl from git, or re-record the stage."
            )
    return "".join(out)


def call_to_line(call: RecordedCall, blobs: dict[str, str]) -> str:
    record = call.record.model_dump(mode="json")
    for message in record["request"]["messages"]:
        message["content"] = pack_content(message["content"], blobs)
    record["context"] = call.context.model_dump(mode="json", exclude_defaults=True)
    return canonical_json(record)


class StageRecording:
    """One stage's recording, built a call at a time.

    A call's line is made when the call is added, by the thread that made the call, while other
    items wait on the server; writing the stage then only sorts and saves. The same call (context
    and key) added twice is one line.
    """

    def __init__(self) -> None:
        self._lines: dict[tuple[Any, ...], str] = {}
        self._blobs: dict[str, str] = {}
        self._lock = threading.Lock()

    def add(self, call: RecordedCall) -> None:
        blobs: dict[str, str] = {}
        line = call_to_line(call, blobs)
        with self._lock:
            self._lines[(*call.context.sort_key(), call.record.key)] = line
            self._blobs.update(blobs)

    def write(self, directory: Path) -> None:
        """Write the stage's calls, replacing what was there: the recording is exactly its run."""
        with self._lock:
            lines = [self._lines[k] for k in sorted(self._lines)]
            blob_lines = [canonical_json({"blob": b, "text": self._blobs[b]}) for b in sorted(self._blobs)]
        directory.mkdir(parents=True, exist_ok=True)
        _write_lines(directory / BLOBS_FILE, blob_lines)
        _write_lines(directory / CALLS_FILE, lines)


def write_stage(directory: Path, calls: Iterable[RecordedCall]) -> None:
    """Write one stage's calls, replacing what was there: the stage's recording is exactly its run."""
    recording = StageRecording()
    for call in calls:
        recording.add(call)
    recording.write(directory)


def _write_lines(path: Path, lines: list[str]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    tmp.replace(path)


def read_blobs(path: Path) -> dict[str, str]:
    blobs: dict[str, str] = {}
    if not path.exists():
        return blobs
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            entry = orjson.loads(line)
            blobs[entry["blob"]] = entry["text"]
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptRecordError(f"{path}:{number}: not a blob line ({exc}).") from exc
        if blob_id(blobs[entry["blob"]]) != entry["blob"]:
            raise CorruptRecordError(
                f"{path}:{number}: blob {entry['blob']} does not hash to its id (edited by hand?). "
                "Fix: restore the file from git, or re-record the stage."
            )
    return blobs


@dataclass(frozen=True)
class LoadedCall:
    path: Path
    line: int
    call: RecordedCall


def parse_call_line(line: str, blobs: dict[str, str], where: str) -> RecordedCall:
    """One line of calls.jsonl, its blobs restored; not yet verified (see CallRecord.problem)."""
    try:
        raw = orjson.loads(line)
        context = CallContext.model_validate(raw.pop("context"))
        for message in raw["request"]["messages"]:
            message["content"] = unpack_content(message["content"], blobs, where)
        return RecordedCall(context=context, record=CallRecord.model_validate(raw))
    except CorruptRecordError:
        raise
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptRecordError(f"{where}: not a recorded call ({exc}).") from exc


def read_stage(directory: Path, *, verify: bool = True) -> Iterator[LoadedCall]:
    blobs = read_blobs(directory / BLOBS_FILE)
    calls_path = directory / CALLS_FILE
    if not calls_path.exists():
        return
    for number, line in enumerate(calls_path.read_text(encoding="utf-8").splitlines(), start=1):
        where = f"{calls_path}:{number}"
        call = parse_call_line(line, blobs, where)
        record = call.record
        problem = record.problem() if verify else None
        if problem is not None:
            raise CorruptRecordError(
                f"{where}: call {record.key} cannot be trusted: {problem}. "
                "Fix: restore the file from git (git checkout -- recordings/), or re-record this call."
            )
        # A verified call written under an older key recipe is served under today's key.
        yield LoadedCall(calls_path, number, call.current() if verify else call)


def stage_dirs(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if (p / CALLS_FILE).exists())


def read_all(root: Path, *, verify: bool = True) -> Iterator[LoadedCall]:
    for directory in stage_dirs(root):
        yield from read_stage(directory, verify=verify)
