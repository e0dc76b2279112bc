"""A recording read back: its bytes and each of its lines checked before anything is served.

The readers of a recording (stage_reader, key_reader, stage_index, item_table, block_places,
folder_scan) check its text and its lines here, so that a damaged file fails, naming its file, its
line and the fix, rather than being served: a file too large to be a recording, a line longer than
a call, bytes that are not UTF-8, a line nested past pipeline.llm.bounds, a block whose text does
not hash to its id, a call line that does not parse or whose record does not verify (key
re-derived, checksum: CallRecord.problem).

The other modules look parse_call_line and MAX_RECORDING_BYTES up on this module where they use
them (line_checks.parse_call_line), so that one name holds each for every reader.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson
from pydantic import ValidationError

from pipeline.errors import CorruptRecordError
from pipeline.llm.blocks import Laid
from pipeline.llm.bounds import MAX_DEPTH, MAX_LINE_BYTES, depth_problem, long_line
from pipeline.llm.recordings import layouts
from pipeline.llm.recordings.line_format import blob_id, unpack_content
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import CallContext

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from pipeline.llm.recordings.stage_reader import RecordingLines

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


def decoded_line(line: bytes, where: str) -> str:
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
