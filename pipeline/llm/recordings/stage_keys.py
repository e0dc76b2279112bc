"""A stage's recorded keys as written, read without verifying them: which of the other stages'
recordings a lookup elsewhere must read and verify whole (issue 33).

A session that misses its own stage's recording and the local cache looks the call up in the other
stages' (pipeline.llm.recordings.lookup_order). Reading one as a StageIndex hashes every file, checks the
folder's pin and verifies every call: at a million calls, judge's 457k-call recording alone took
84 CPU s and 422 MB at its peak. In a recording run none of refine's calls is in them. So each
other stage is first read here for its keys only: each call line's key as written, one line at a
time, held in 32 bytes a key (pipeline.llm.recordings.key_places).

The keys are a hint, never served and never trusted. A stage whose keys show the call asked for is
read and verified whole, as before, and only then may it answer. A key shown by a line of a
recording that verifies is the key verification re-derives for that line. So a stage whose verified
recording holds a call also shows its key here, and passing over a stage that does not show the key
loses nothing a whole read would serve. A recording not as today's writer writes it (a line under an
older key recipe, a line that is not JSON, a link, a missing shard) gives no keys (None). The
caller then reads it whole, which serves or names what is wrong, as before.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

import orjson

from pipeline.errors import JudgeloopError
from pipeline.llm.keys import KEY_RECIPE
from pipeline.llm.recordings import line_checks, shards, stage_folders
from pipeline.llm.recordings.folder_scan import BLOB_OPENING
from pipeline.llm.recordings.key_places import KeyPlaces
from pipeline.llm.recordings.offsets import READ_BUFFER, OpenFiles


class _NotAsWritten(Exception):
    """A recording this reader does not read for keys (read whole instead)."""


def recorded_keys(directory: Path) -> Mapping[str, int] | None:
    """The keys a stage's recording shows on its call lines (each -> its row in the order read),
    unverified; None where the recording is not read so (see the module: read it whole)."""
    try:
        stage_folders.refuse_linked(directory)
        return KeyPlaces.of((key, row) for row, key in enumerate(_keys(directory)))
    except (JudgeloopError, OSError, ValueError, KeyError, TypeError, AttributeError, _NotAsWritten):
        return None


def _call_files(directory: Path) -> list[Path]:
    """The files that hold the recording's call lines: the manifest's shards of calls, or the
    recording's one file (whose block lines are passed over, as is a legacy blocks file)."""
    path = directory / stage_folders.CALLS_FILE
    with path.open("rb") as opening:
        head = opening.read(len(shards.MANIFEST_OPENING))
    if head != shards.MANIFEST_OPENING.encode("ascii"):
        return [path]
    named = shards.parse_manifest(path, line_checks.recording_text(path))
    return [directory / name for name, _ in named if shards.prefix_of(name)[0] == "calls"]


def _keys(directory: Path) -> Iterator[str]:
    files = OpenFiles()  # never through a link, and only plain files
    try:
        for path in _call_files(directory):
            fd = files.fd(files.open(path))
            if os.fstat(fd).st_size > line_checks.MAX_RECORDING_BYTES:
                raise _NotAsWritten(path)
            with open(fd, "rb", buffering=READ_BUFFER, closefd=False) as stream:
                for raw in stream:
                    if not raw.startswith(BLOB_OPENING):
                        yield _key(raw)
    finally:
        files.close()


def _key(raw: bytes) -> str:
    """The key a call line shows, as a line of today's key recipe writes it."""
    line = orjson.loads(raw)
    key = line["key"]
    if line.get("recipe", KEY_RECIPE) != KEY_RECIPE or not isinstance(key, str):
        raise _NotAsWritten(key)  # under an older recipe, today's key is derived from the request
    return key
