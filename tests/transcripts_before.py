"""pipeline.data.transcripts' reading as it was at 112fd63, before issue 33's rows (every turn a
`Turn` model, validated, cleaned by model_copy, rendered from the models): the oracle that
tests/test_transcript_rows.py checks the rows path against. Frozen: never change it to match the
new code; a difference between the two is what those tests exist to find.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from pipeline.data.input_files import read_lines, read_text, shown_path
from pipeline.data.settings import DataSettings
from pipeline.data.transcript_places import found
from pipeline.errors import InputError

# The person assessed, compared case-insensitively: DAIC-WOZ and our AnnoMI conversion say
# "Participant"; AnnoMI itself and hand-written transcripts tend to say "client" or "patient".
PARTICIPANT_SPEAKERS = frozenset({"participant", "client", "patient", "subject"})
# Annotations, not speech: <sync>, <synch>, <laughter>, [laughter], [unintelligible 00:01:33].
_MARKER = re.compile(r"<[^<>\n]{1,40}>|\[[^\[\]\n]{1,40}\]")
_SPEAKER_LINE = re.compile(r"\s*([^:\s][^:]{0,39}?)\s*:(.*)")
_DAIC = "_transcript.csv"
_BOM = b"\xef\xbb\xbf"
_JSONL_SCHEMA = 'one object per line: {"id": "300", "turns": [{"speaker": "Ellie", "text": "hi"}]}'


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Turn(_Frozen):
    speaker: str
    text: str
    start: float | None = None
    stop: float | None = None


class Transcript(_Frozen):
    item_id: str
    turns: tuple[Turn, ...]
    source: str  # relative to the root it was loaded from, when it lies under it
    # The original code joined `speaker + " : " + value`; data.speaker_separator chooses.
    separator: str = " : "
    # The speakers the prompts name (data.interviewer, data.participant).
    interviewer: str = "Ellie"
    participant: str = "Participant"

    @property
    def text(self) -> str:
        return self.render(self.separator)

    def render(self, separator: str = ": ") -> str:
        return "\n".join(f"{turn.speaker}{separator}{turn.text}" for turn in self.turns)


# Turns made in one validation, each the object Turn(...) gives, in a third of the time: a
# transcript's turns are made once per stage's index and once when its item runs (issue 33).
_TURNS = TypeAdapter(list[Turn])


class _Record(BaseModel):
    """One JSONL line; other top-level keys are ignored, a turn takes only its four keys."""

    id: str | int
    turns: list[Turn] | None = None
    text: str | None = None


def _nothing_left(speakers: set[str], source: str, line: int | None) -> InputError:
    listed = ", ".join(sorted(speakers))
    problem = f"no turns left after data.drop_markers / data.participant_only (speakers: {listed})"
    fix = f"name the subject one of {', '.join(sorted(PARTICIPANT_SPEAKERS))}, or turn those off"
    return InputError(source, line, problem, fix)


def _unique(item_id: str, shown: str, line: int | None, found: Mapping[str, tuple[str, int | None]]) -> None:
    """`found`: the ids indexed so far, each with its file's name shown and its line."""
    if item_id in found:
        first_shown, first_line = found[item_id]
        problem = f"item id '{item_id}' is already used by {first_shown}"
        problem += f":{first_line}" if first_line is not None else ""
        raise InputError(shown, line, problem, "give each transcript its own id")


def _named(transcript: Transcript, settings: DataSettings) -> Transcript:
    named = {
        "separator": settings.speaker_separator,
        "interviewer": settings.interviewer,
        "participant": settings.participant,
    }
    return transcript.model_copy(update=named)


def _id_order(item_id: str) -> tuple[int, int, str]:
    # Numbers in numeric order (DAIC 300..492 before a 1000), any other ids after them.
    numeric = item_id.isascii() and item_id.isdigit()
    return (0, int(item_id), item_id) if numeric else (1, 0, item_id)


def _read_indexed(path: Path, shown: str) -> Iterator[tuple[Transcript, int | None, tuple[int, int] | None]]:
    """Each transcript of the file with where it lies, one at a time (a JSONL file's lines are
    parsed as they are reached, and each line's number and byte span are kept to read it again alone)."""
    if path.suffix.lower() != ".jsonl":
        yield _read_file(path, shown), None, None
        return
    text = read_text(path, shown)  # as read_lines reads it, with each line's "\r" kept to count bytes
    if not text.strip():
        raise InputError(shown, 1, "the file is empty", "delete it, or export it again")
    with path.open("rb") as raw:
        offset = len(_BOM) if raw.read(len(_BOM)) == _BOM else 0
    for number, raw_line in enumerate(text.split("\n"), start=1):
        size = len(raw_line.encode("utf-8"))
        line = raw_line.removesuffix("\r")
        if line.strip():
            transcript, _ = _read_record(line, shown, number)
            yield transcript, number, (offset, size)
        offset += size + len(b"\n")


def _read_file(path: Path, shown: str) -> Transcript:
    """A DAIC-WOZ or plain-text transcript: one a file."""
    lines = read_lines(path, shown)
    daic = path.name.lower().endswith(_DAIC)
    item_id = path.name[: -len(_DAIC)] if daic else path.stem
    turns = _read_daic(lines, shown) if path.suffix.lower() == ".csv" else _speaker_lines(lines, shown, None)
    return _transcript(item_id, turns, shown, None)


def _transcript(item_id: str, turns: list[Turn], shown: str, line: int | None) -> Transcript:
    _check_whole(item_id, bool(turns), shown, line)
    return Transcript(item_id=item_id.strip(), turns=tuple(turns), source=shown)


def _check_whole(item_id: str, has_turns: bool, shown: str, line: int | None) -> None:
    if not item_id.strip():
        raise InputError(shown, line, "the transcript has no id", "name it NNN_TRANSCRIPT.csv, or give an id")
    if not has_turns:
        raise InputError(shown, line, "no turn has both a speaker and text", "check that it is a transcript")


def _read_daic(lines: list[str], shown: str) -> list[Turn]:
    return _TURNS.validate_python(_daic_rows(lines, shown))


def _daic_rows(lines: list[str], shown: str) -> list[dict[str, object]]:
    """A DAIC-WOZ file's turns as rows (speaker, text, start, stop), checked."""
    header = [h.strip().lower() for h in lines[0].split("\t")]
    if "speaker" not in header or "value" not in header:
        comma = " (it looks comma-separated)" if len(header) == 1 and "," in lines[0] else ""
        problem = (
            f"the header has columns {', '.join(map(repr, header))}{comma}; expected start_time, "
            "stop_time, speaker, value (speaker and value are required)"
        )
        fix = "make line 1 the tab-separated header start_time<TAB>stop_time<TAB>speaker<TAB>value"
        raise InputError(shown, 1, problem, fix)
    col = {name: i for i, name in enumerate(header)}
    width, speaker, value = len(header), col["speaker"], col["value"]
    start_at, stop_at = col.get("start_time"), col.get("stop_time")
    rows: list[dict[str, object]] = []
    # Each row is read once per stage's index and once when its item runs (issue 33), so the loop
    # strips only the four fields it uses and the turns are made together (_TURNS); the checks and
    # their order are as they were.
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != width:
            problem = f"the row has {len(fields)} tab-separated fields, the header {width}"
            fix = "replace a tab inside the text with a space; give a short row its empty fields"
            raise InputError(shown, number, problem, fix)
        # float() takes a number with whitespace around it as _seconds does, and fails on anything
        # else (an empty field too), which _seconds then reads as it always did: None, or the error.
        try:
            start = None if start_at is None else float(fields[start_at])
        except ValueError:
            start = _seconds(fields, start_at, "start_time", shown, number)
        try:
            stop = None if stop_at is None else float(fields[stop_at])
        except ValueError:
            stop = _seconds(fields, stop_at, "stop_time", shown, number)
        said, text = fields[speaker].strip(), fields[value].strip()
        if said and text:
            rows.append({"speaker": said, "text": text, "start": start, "stop": stop})
    return rows


def _seconds(fields: list[str], index: int | None, column: str, shown: str, line: int) -> float | None:
    field = "" if index is None else fields[index].strip()
    if not field:
        return None
    try:
        return float(field)
    except ValueError:
        problem = f"{column} '{field}' is not a number"
        raise InputError(shown, line, problem, "write seconds, e.g. 12.5, or leave it empty") from None


def _speaker_lines(lines: list[str], shown: str, at: int | None) -> list[Turn]:
    """`Speaker: text` lines; `at` is the JSONL line they came from, if they did."""
    rows: list[dict[str, object]] = []
    for number, line in enumerate(lines, start=1):
        match = _SPEAKER_LINE.fullmatch(line)
        if line.strip() and match is None:
            where = "the line" if at is None else f"line {number} of its 'text'"
            fix = "write one 'Speaker: text' turn per line; move files that are not transcripts elsewhere"
            raise InputError(shown, number if at is None else at, f"{where} lacks a 'Speaker:'", fix)
        if match and match[2].strip():
            rows.append({"speaker": match[1], "text": match[2].strip()})
    return _TURNS.validate_python(rows)


def _read_record(line: str, shown: str, number: int) -> tuple[Transcript, int | None]:
    try:
        record = _Record.model_validate_json(line)
    except ValidationError as exc:
        problem = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'line'}: {e['msg']}" for e in exc.errors())
        raise InputError(shown, number, problem, _JSONL_SCHEMA) from None
    if (record.turns is None) == (record.text is None):
        raise InputError(shown, number, "give 'turns' or 'text', exactly one of them", _JSONL_SCHEMA)
    if record.text is not None:
        turns = _speaker_lines(record.text.split("\n"), shown, number)
    else:
        stripped = (
            t.model_copy(update={"speaker": t.speaker.strip(), "text": t.text.strip()})
            for t in record.turns or []
        )
        turns = [t for t in stripped if t.speaker and t.text]
    return _transcript(str(record.id), turns, shown, number), number


def _clean(transcript: Transcript, settings: DataSettings, line: int | None) -> Transcript:
    if not (settings.drop_markers or settings.participant_only):
        return transcript
    turns = list(transcript.turns)
    if settings.drop_markers:
        unmarked = (t.model_copy(update={"text": " ".join(_MARKER.sub(" ", t.text).split())}) for t in turns)
        turns = [t for t in unmarked if t.text]
    if settings.participant_only:
        turns = [t for t in turns if t.speaker.casefold() in PARTICIPANT_SPEAKERS]
    if not turns:
        raise _nothing_left({t.speaker for t in transcript.turns}, transcript.source, line)
    return transcript.model_copy(update={"turns": tuple(turns)})


def load_before(settings: DataSettings, root: Path) -> list[Transcript]:
    """Every transcript under `settings.transcripts` read, checked and cleaned as the index did
    (each file in `found`'s order, ids unique, then cleaned), in item-id order, up to data.limit,
    then named; data.labels is left out (its reading did not change)."""
    folder = root / settings.transcripts
    seen: dict[str, tuple[str, int | None]] = {}
    kept: list[Transcript] = []
    for file in found(folder, root):
        path = folder / file if file else folder
        shown = shown_path(path, root)
        for transcript, line, _ in _read_indexed(path, shown):
            _unique(transcript.item_id, shown, line, seen)
            seen[transcript.item_id] = (shown, line)
            kept.append(_clean(transcript, settings, line))
    kept.sort(key=lambda t: _id_order(t.item_id))
    chosen = kept if settings.limit is None else kept[: settings.limit]
    return [_named(t, settings) for t in chosen]
