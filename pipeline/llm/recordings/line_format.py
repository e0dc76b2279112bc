"""A recording's lines: a call, and a block of text shared by calls, each as one line of canonical JSON.

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
empty local cache, so a fresh clone replays with no model. It is written by
pipeline.llm.recordings.stage_writer and read back, every line checked, by stage_reader and
key_reader (the checks: line_checks).

Content repeated across calls (the transcript inside every judge prompt, the rubric) is stored
once: message text is cut into blocks of whole lines at content-defined boundaries (a line whose
CRC-32 is 0 mod 8 ends a block once the block has MIN_BLOCK characters), so the same transcript
yields the same blocks whatever prompt surrounds it. Blocks of MIN_BLOCK characters or more become
blob lines; a message becomes a list of literal strings and {"blob": hash} references.

Line breaks inside a call. JSON escapes every control character, but not U+0085, U+2028 and U+2029,
which str.splitlines (and many editors and tools) take for line breaks: a reply holding one would
split its line in two. So a line that holds any of the three has them written as JSON escapes
(\\u2028), which parse back to the same text, and a recording is read split at "\\n" only, so a file
written raw before still reads. Lines without them (every recording before) keep their bytes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

import orjson

from pipeline.errors import CacheError, CorruptRecordError
from pipeline.llm.blocks import Laid, Part, pack_parts
from pipeline.llm.keys import canonical_json
from pipeline.llm.records import RecordedCall

CALL_OPENING = b'{"checksum":"'  # how the writer opens every call line (canonical JSON, keys sorted)
BLOCK_OPENING = b'{"blob":"'  # and every block line (a line opening so is no call)


def blob_id(text: str) -> str:
    # 64 bits of sha256: blob ids are only compared within one stage's recording, which checks
    # every blob against its id on read, and short ids keep the many references in calls small.
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def pack_content(text: str, blobs: dict[str, str]) -> str | list[Part]:
    def keep(block: str) -> dict[str, str]:
        blob = blob_id(block)
        if blobs.setdefault(blob, block) != block:
            raise blob_collision(blob)
        return {"blob": blob}

    parts = pack_parts(text, keep)
    if len(parts) == 1 and isinstance(parts[0], str):
        return parts[0]
    return parts


def blob_collision(blob: str) -> CacheError:
    """Two texts of one recording whose blob ids (64 bits of sha256) are one: found by accident once
    in billions of recordings of a million blocks, but made on purpose in about 2**32 tries, by
    someone whose text (a transcript) goes into the prompts beside another's. Kept as one, either
    text would be recorded for both, and the call of the other would fail its check on every read
    ("request edited"); the recording is refused instead, and its old file kept. Here within one
    call's messages; across its calls, pipeline.llm.recordings.stage_calls.StageCalls.add."""
    return CacheError(
        f"two different texts in the prompts share the blob id {blob} (the first 64 bits of their "
        "sha256), which a recording cannot hold apart; such a pair is made on purpose. Fix: find the "
        "input whose text holds it (a transcript someone sent) and leave it out of the experiment"
    )


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
    """The ids of the blocks a call line refers to: found as the writer writes a reference. JSON lets a
    line spell one otherwise (`{"blob" : "\\u0061…", "x": 1}`: valid, verified as any line, read by a
    full read), and a reader or a writer that keeps the line must not pass its block by: a line naming
    "blob" other than in the references found, or holding a \\u escape (the only way to spell a
    letter of "blob" otherwise), has them read from its JSON instead."""
    refs: list[str] = BLOB_REF.findall(line)
    if line.count('"blob"') == len(refs) and "\\u" not in line:
        return refs
    try:
        messages = orjson.loads(line)["request"]["messages"]
        parts = [
            part
            for message in messages
            if isinstance(message["content"], list)
            for part in message["content"]
        ]
        return [
            part["blob"] for part in parts if isinstance(part, dict) and isinstance(part.get("blob"), str)
        ]
    except (ValueError, KeyError, TypeError, AttributeError):
        return refs  # not a call's JSON: its parse names what is wrong


def file_lines(text: str) -> list[str]:
    """A recording's lines, split at "\\n" only: never at a character str.splitlines also breaks at."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines
