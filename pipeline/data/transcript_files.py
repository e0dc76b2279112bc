"""A transcript file's bytes read and checked: its transcripts, or an error naming the file, line and fix.

A DAIC-WOZ or plain-text file's turns are checked as its lines are read and kept as rows
(pipeline.data.transcript_text: no `Turn` model made, issue 33); a JSONL line is validated against
its schema as a model, as untrusted JSON is everywhere. Formats: see pipeline.data.transcripts. The
bytes are read through one descriptor, the file's identity with them (pipeline.data.transcript_open).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, StrictInt, StrictStr, ValidationError

from pipeline.data.input_files import COLUMN_FIX, checked_text, decode, repeated_column, text_lines
from pipeline.data.item_ids import FORMULA_FIX, formula_problem
from pipeline.data.json_keys import REPEATED_FIX, repeated_key, repeated_problem
from pipeline.data.transcript_text import Row, Transcript, Turn
from pipeline.errors import InputError
from pipeline.llm.project_files import quoted

_SPEAKER_LINE = re.compile(r"\s*([^:\s][^:]{0,39}?)\s*:(.*)")
DAIC = "_transcript.csv"
_DAIC_COLUMNS = ("start_time", "stop_time", "speaker", "value")
_BOM = b"\xef\xbb\xbf"
_JSONL_SCHEMA = 'one object per line: {"id": "300", "turns": [{"speaker": "Ellie", "text": "hi"}]}'

At = tuple[int | None, tuple[int, int] | None]  # a transcript's JSONL line and byte span, or none


class _Record(BaseModel):
    """One JSONL line; other top-level keys are ignored, a turn takes only its four keys."""

    # Strict: JSON's true, 1.0 and 1e2 were ids "1", "1" and "100" (pydantic's lax numbers), so that
    # two lines' ids could be one that neither line spells.
    id: StrictStr | StrictInt
    turns: list[Turn] | None = None
    text: str | None = None


def item_id_of(path: Path) -> str:
    """A DAIC-WOZ or plain-text file's item id, as its name gives it (not yet stripped)."""
    return path.name[: -len(DAIC)] if path.name.lower().endswith(DAIC) else path.stem


def read_indexed(path: Path, shown: str, data: bytes) -> Iterator[tuple[Transcript, At]]:
    """Each transcript of the file `path` names, its bytes `data`, with where it lies, one at a time
    (a JSONL file's lines are parsed as they are reached, and each line's number and byte span are
    kept to read it again alone)."""
    if path.suffix.lower() != ".jsonl":
        yield read_file(path, shown, data), (None, None)
        return
    text = checked_text(data, shown)  # as text_lines reads it, with each line's "\r" kept to count bytes
    if not text.strip():
        raise InputError(shown, 1, "the file is empty", "delete it, or export it again")
    offset = len(_BOM) if data.startswith(_BOM) else 0
    for number, raw_line in enumerate(text.split("\n"), start=1):
        size = len(raw_line.encode("utf-8"))
        line = raw_line.removesuffix("\r")
        if line.strip():
            yield read_record(line, shown, number), (number, (offset, size))
        offset += size + len(b"\n")


def read_one(path: Path, shown: str, line: int | None, data: bytes) -> Transcript:
    """The transcript at `line` of the file, read again: `data` is the JSONL line's bytes alone
    (its span), or the file's of its one transcript (line None)."""
    if line is None:
        return read_file(path, shown, data)
    return read_record(decode(data, shown).removesuffix("\r"), shown, line)


def read_file(path: Path, shown: str, data: bytes) -> Transcript:
    """A DAIC-WOZ or plain-text transcript, one a file: the file `path` names, its bytes `data`."""
    lines = text_lines(checked_text(data, shown), shown)
    timed = path.suffix.lower() == ".csv"
    rows = daic_rows(lines, shown) if timed else speaker_lines(lines, shown, None)
    return _transcript(item_id_of(path), rows, shown, None, timed)


def _transcript(item_id: str, rows: list[Row], shown: str, line: int | None, timed: bool) -> Transcript:
    check_whole(item_id, bool(rows), shown, line)
    return Transcript.of_rows(item_id.strip(), rows, shown, timed=timed)


def check_whole(item_id: str, has_turns: bool, shown: str, line: int | None) -> None:
    if not item_id.strip():
        raise InputError(shown, line, "the transcript has no id", "name it NNN_TRANSCRIPT.csv, or give an id")
    if (formula := formula_problem(item_id.strip(), shown)) is not None:
        where = "rename the file" if line is None else "change its 'id'"
        raise InputError(shown, line, formula, f"{FORMULA_FIX} ({where})")
    if not has_turns:
        raise InputError(shown, line, "no turn has both a speaker and text", "check that it is a transcript")


def daic_rows(lines: list[str], shown: str) -> list[Row]:
    """A DAIC-WOZ file's turns as rows (speaker, text, start, stop), checked."""
    header = [h.strip().lower() for h in lines[0].split("\t")]
    if "speaker" not in header or "value" not in header:
        comma = " (it looks comma-separated)" if len(header) == 1 and "," in lines[0] else ""
        problem = (
            f"the header has columns {quoted(shown, ', '.join(map(repr, header)))}{comma}; expected "
            "start_time, stop_time, speaker, value (speaker and value are required)"
        )
        fix = "make line 1 the tab-separated header start_time<TAB>stop_time<TAB>speaker<TAB>value"
        raise InputError(shown, 1, problem, fix)
    if (twice := repeated_column(header, [h if h in _DAIC_COLUMNS else None for h in header])) is not None:
        raise InputError(shown, 1, twice, COLUMN_FIX)
    col = {name: i for i, name in enumerate(header)}
    width, speaker, value = len(header), col["speaker"], col["value"]
    start_at, stop_at = col.get("start_time"), col.get("stop_time")
    rows: list[Row] = []
    # Each row is read once per stage's index and once when its item runs (issue 33), so the loop
    # strips only the four fields it uses and keeps a tuple; the checks and their order are as they were.
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != width:
            problem = f"the row has {len(fields)} tab-separated fields, the header {width}"
            fix = "replace a tab inside the text with a space; give a short row its empty fields"
            raise InputError(shown, number, problem, fix)
        # float() takes a number with whitespace around it as seconds() does, and fails on anything
        # else (an empty field too), which seconds() then reads as it always did: None, or the error.
        try:
            start = None if start_at is None else float(fields[start_at])
        except ValueError:
            start = seconds(fields, start_at, "start_time", shown, number)
        try:
            stop = None if stop_at is None else float(fields[stop_at])
        except ValueError:
            stop = seconds(fields, stop_at, "stop_time", shown, number)
        said, text = fields[speaker].strip(), fields[value].strip()
        if said and text:
            rows.append((said, text, start, stop))
    return rows


def seconds(fields: list[str], index: int | None, column: str, shown: str, line: int) -> float | None:
    field = "" if index is None else fields[index].strip()
    if not field:
        return None
    try:
        return float(field)
    except ValueError:
        given = quoted(shown, "'" + field + "'")
        problem = f"{column} {given} is not a number"
        raise InputError(shown, line, problem, "write seconds, e.g. 12.5, or leave it empty") from None


def speaker_lines(lines: list[str], shown: str, at: int | None) -> list[Row]:
    """`Speaker: text` lines as rows; `at` is the JSONL line they came from, if they did."""
    rows: list[Row] = []
    for number, line in enumerate(lines, start=1):
        match = _SPEAKER_LINE.fullmatch(line)
        if line.strip() and match is None:
            where = "the line" if at is None else f"line {number} of its 'text'"
            fix = "write one 'Speaker: text' turn per line; move files that are not transcripts elsewhere"
            raise InputError(shown, number if at is None else at, f"{where} lacks a 'Speaker:'", fix)
        if match and (text := match[2].strip()):
            rows.append((match[1], text, None, None))
    return rows


def read_record(line: str, shown: str, number: int) -> Transcript:
    """A JSONL line's transcript: its turns validated as models, or its text read as speaker lines."""
    if (key := repeated_key(line)) is not None:  # pydantic's parser would keep the last value silently
        raise InputError(shown, number, repeated_problem(key, shown), REPEATED_FIX)
    try:
        record = _Record.model_validate_json(line)
    except ValidationError as exc:
        problem = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'line'}: {e['msg']}" for e in exc.errors())
        raise InputError(shown, number, problem, _JSONL_SCHEMA) from None
    if (record.turns is None) == (record.text is None):
        raise InputError(shown, number, "give 'turns' or 'text', exactly one of them", _JSONL_SCHEMA)
    item_id = str(record.id)
    if record.text is not None:
        rows = speaker_lines(record.text.split("\n"), shown, number)
        return _transcript(item_id, rows, shown, number, False)
    stripped = (
        t.model_copy(update={"speaker": t.speaker.strip(), "text": t.text.strip()})
        for t in record.turns or []
    )
    turns = [t for t in stripped if t.speaker and t.text]
    check_whole(item_id, bool(turns), shown, number)
    return Transcript(item_id=item_id.strip(), turns=turns, source=shown)
