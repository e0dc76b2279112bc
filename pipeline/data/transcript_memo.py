"""Transcript files this process has read and checked for an index, remembered by their bytes.

A stage's items, status' dry run of each stage and the bench's in-process stages index the same
files again; a file whose bytes were checked under the same name and cleaning is then only hashed
(issue 33). The bytes hashed are those parsed, read once through one descriptor
(pipeline.data.transcript_open), so a file changed between two looks cannot be remembered under
another file's bytes, and a changed file is never served from here. Remembered: a digest of (name,
the cleaning settings, the file's bytes) -> each
transcript's id, JSONL line and span, and speakers once cleaned (each distinct set of speakers
once); never the text. Full at CHECKED_FILES, the memo keeps what it holds and takes no more: every
stage reads the files in the same order, so a memo cleared when full held, at each pass, only the
last files of the one before, which the next pass reaches last, after clearing them (a million
files: no file found again).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from hashlib import sha256
from pathlib import Path

from pipeline.data.settings import DataSettings
from pipeline.data.transcript_files import At, read_indexed
from pipeline.data.transcript_text import clean
from pipeline.errors import InputError
from pipeline.llm.project_files import quoted

_Checked = tuple[tuple[str, int | None, tuple[int, int] | None, frozenset[str]], ...]
checked: dict[bytes, _Checked] = {}
_speaker_sets: dict[frozenset[str], frozenset[str]] = {}
CHECKED_FILES = 200_000
# Where each id indexed so far lies: its file's name shown, its JSONL line, and the id as spelled there
# (ids compare in Unicode's composed form: pipeline.data.transcripts).
Found = Mapping[str, tuple[str, int | None, str]]


def _checked_key(path: Path, settings: DataSettings, data: bytes) -> bytes:
    name = path.name.encode("utf-8", "surrogatepass")
    digest = sha256(len(name).to_bytes(4, "little") + name)
    digest.update(bytes([settings.drop_markers, settings.participant_only]))
    digest.update(data)
    return digest.digest()


def index_file(
    path: Path, shown: str, data: bytes, settings: DataSettings, found: Found
) -> Iterator[tuple[str, At, frozenset[str]]]:
    """Each transcript of the file `path` names, its bytes `data`: its id, where it lies, its
    speakers once cleaned; read and checked (ids unique against `found`), or only hashed when this
    process checked the same bytes under the same name and cleaning before."""
    key = _checked_key(path, settings, data)
    remembered = checked.get(key)
    if remembered is not None:
        for item_id, line, span, said in remembered:
            unique(item_id, shown, line, found)
            yield item_id, (line, span), said
        return
    seen: list[tuple[str, int | None, tuple[int, int] | None, frozenset[str]]] = []
    for item_id, (line, span), said in checked_transcripts(path, shown, settings, found, data):
        shared = _speaker_sets.setdefault(said, said) if len(checked) < CHECKED_FILES else said
        seen.append((item_id, line, span, shared))
        yield item_id, (line, span), said
    if len(checked) < CHECKED_FILES:
        checked[key] = tuple(seen)


def checked_transcripts(
    path: Path, shown: str, settings: DataSettings, found: Found, data: bytes
) -> Iterator[tuple[str, At, frozenset[str]]]:
    """The file's transcripts read from its bytes `data` and checked: ids (unique against `found`),
    where each lies, speakers once cleaned. A DAIC-WOZ or text file's turns are rows, no models
    (issue 33)."""
    for transcript, (line, span) in read_indexed(path, shown, data):
        unique(transcript.item_id, shown, line, found)
        yield transcript.item_id, (line, span), clean(transcript, settings, line).speakers


def unique(item_id: str, shown: str, line: int | None, found: Found) -> None:
    """An InputError if `item_id` was indexed already, or one that looks the same, naming where."""
    if item_id in found:
        first_shown, first_line, first_id = found[item_id]
        first = first_shown + (f":{first_line}" if first_line is not None else "")
        fix = "give each transcript its own id"
        if first_id == item_id:
            raise InputError(
                shown, line, f"item id {quoted(shown, _named(item_id))} is already used by {first}", fix
            )
        fix = "keep one of the two if they are one interview copied twice, or " + fix
        problem = (
            f"item id {quoted(shown, _spelled(item_id))} looks the same as "
            f"{quoted(first_shown, _spelled(first_id))} of {first}: one name in two Unicode spellings"
        )
        raise InputError(shown, line, problem, fix)


def _named(item_id: str) -> str:
    return f"'{item_id}'"


def _spelled(item_id: str) -> str:
    return f"'{item_id}' ({_code_points(item_id)})"


def _code_points(text: str) -> str:
    shown = " ".join(f"U+{ord(c):04X}" for c in text[:16])
    return shown + (" ..." if len(text) > 16 else "")
