"""Interview transcripts and PHQ-8 labels in, typed and checked.

Formats, recognised per file by name (a folder is searched one level deep):
  DAIC-WOZ    NNN_TRANSCRIPT.csv, flat or in NNN_P/ folders: tab-separated, a header naming at least
              `speaker` and `value` (DAIC: start_time stop_time speaker value). Item id NNN.
  plain text  *.txt: one `Speaker: text` turn per line, blank lines ignored. Item id = file stem.
  JSONL       *.jsonl: one transcript per line, {"id": "300", "turns": [{"speaker": "Ellie",
              "text": "hi", "start": 0.5, "stop": 1.2}, ...]} (start/stop optional), or
              {"id": "300", "text": "Ellie: hi\\nParticipant: hello"} with plain-text lines.
In sub-folders only *_TRANSCRIPT.csv is read: real DAIC folders also hold *_CLNF_*.txt features.

Paper parity is the default: turns with an empty speaker or value are dropped (the original's
`dropna(subset=["speaker", "value"])`), nothing else. `text` renders `{speaker}: {value}` lines as the
re-implementation does; the original scripts joined `speaker + " : " + value`, which `render(" : ")`
gives. Unlike pandas, quotes are literal (AnnoMI has turns opening with `"`, which pandas would read
as a quoted field), fields are stripped, and a turn that reads "NA" or "null" stays text.
"""

from __future__ import annotations

import csv
import re
import warnings
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from pipeline.config import DataSettings
from pipeline.errors import ConfigError, InputError

# The person assessed, compared case-insensitively: DAIC-WOZ and our AnnoMI conversion say
# "Participant"; AnnoMI itself and hand-written transcripts tend to say "client" or "patient".
PARTICIPANT_SPEAKERS = frozenset({"participant", "client", "patient", "subject"})
SEARCHED = ("*_TRANSCRIPT.csv", "*/*_TRANSCRIPT.csv", "*.txt", "*.jsonl")
PHQ8_ITEMS = ("NoInterest", "Depressed", "Sleep", "Tired", "Appetite", "Failure", "Concentrating", "Moving")
# Annotations, not speech: <sync>, <synch>, <laughter>, [laughter], [unintelligible 00:01:33].
_MARKER = re.compile(r"<[^<>\n]{1,40}>|\[[^\[\]\n]{1,40}\]")
_SPEAKER_LINE = re.compile(r"\s*([^:\s][^:]{0,39}?)\s*:(.*)")
_DAIC = "_transcript.csv"
_JSONL_SCHEMA = 'one object per line: {"id": "300", "turns": [{"speaker": "Ellie", "text": "hi"}]}'


class InputWarning(UserWarning):
    """A data file was skipped, or looks inconsistent; loading went on."""


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

    @property
    def text(self) -> str:
        return self.render(self.separator)

    def render(self, separator: str = ": ") -> str:
        return "\n".join(f"{turn.speaker}{separator}{turn.text}" for turn in self.turns)


class Phq8Label(_Frozen):
    """One row of an AVEC2017 split file. The test split has no item columns: those stay None."""

    item_id: str
    binary: int | None = None
    score: int | None = None
    gender: int | None = None
    no_interest: int | None = None
    depressed: int | None = None
    sleep: int | None = None
    tired: int | None = None
    appetite: int | None = None
    failure: int | None = None
    concentrating: int | None = None
    moving: int | None = None


class _Record(BaseModel):
    """One JSONL line; other top-level keys are ignored, a turn takes only its four keys."""

    id: str | int
    turns: list[Turn] | None = None
    text: str | None = None


def load_transcripts(settings: DataSettings, root: Path = Path(".")) -> list[Transcript]:
    """Every transcript under `settings.transcripts`, cleaned as asked, in item-id order."""
    if settings.limit is not None and settings.limit < 0:
        raise ConfigError(f"data.limit is {settings.limit}. Fix: a count of 0 or more, or null for all.")
    found: dict[str, tuple[Transcript, int | None]] = {}
    for path in _discover(root / settings.transcripts, root):
        for transcript, line in _read(path, _shown(path, root)):
            if transcript.item_id in found:
                first, at = found[transcript.item_id]
                problem = f"item id '{transcript.item_id}' is already used by {first.source}"
                problem += f":{at}" if at is not None else ""
                raise InputError(transcript.source, line, problem, "give each transcript its own id")
            cleaned = _clean(transcript, settings, line)
            found[transcript.item_id] = (
                cleaned.model_copy(update={"separator": settings.speaker_separator}),
                line,
            )
    ordered = sorted((t for t, _ in found.values()), key=lambda t: _id_order(t.item_id))
    return ordered if settings.limit is None else ordered[: settings.limit]


def _id_order(item_id: str) -> tuple[int, int, str]:
    # Numbers in numeric order (DAIC 300..492 before a 1000), any other ids after them.
    numeric = item_id.isascii() and item_id.isdigit()
    return (0, int(item_id), item_id) if numeric else (1, 0, item_id)


def _shown(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def _wanted(path: Path, nested: bool) -> bool:
    name = path.name.lower()
    return name.endswith(_DAIC) or (not nested and path.suffix.lower() in (".txt", ".jsonl"))


def _discover(path: Path, root: Path) -> list[Path]:
    shown = _shown(path, root)
    if not path.exists():
        raise InputError(
            shown, None, "no such file or folder", "point data.transcripts in params.yaml at one"
        )
    if path.is_file():
        if path.name.startswith("._") or path.suffix.lower() not in (".csv", ".txt", ".jsonl"):
            raise InputError(shown, None, "not a transcript file", "use NNN_TRANSCRIPT.csv, *.txt or *.jsonl")
        return [path]
    candidates = [(p, False) for p in sorted(path.iterdir())]
    for folder in sorted(p for p in path.iterdir() if p.is_dir()):
        candidates += [(p, True) for p in sorted(folder.iterdir())]
    chosen: list[Path] = []
    for candidate, nested in candidates:
        name = candidate.name
        if not candidate.is_file():
            continue
        if name == ".DS_Store" or (name.startswith("._") and _wanted(Path(name[2:]), nested)):
            message = f"{_shown(candidate, root)}: skipped a macOS metadata file, not a transcript"
            warnings.warn(message, InputWarning, stacklevel=3)
        elif not name.startswith("._") and _wanted(candidate, nested):
            chosen.append(candidate)
    if not chosen:
        problem = "no transcripts in this folder; looked for " + ", ".join(SEARCHED)
        raise InputError(shown, None, problem, "add transcripts in one of those layouts, or point elsewhere")
    return chosen


def _decode(path: Path, shown: str) -> list[str]:
    data = path.read_bytes().removeprefix(b"\xef\xbb\xbf")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        fix = f"re-encode the file as UTF-8, e.g. iconv -f WINDOWS-1252 -t UTF-8 '{shown}' > fixed"
        raise InputError(shown, line, f"byte 0x{data[exc.start]:02x} is not UTF-8", fix) from None
    if not text.strip():
        raise InputError(shown, 1, "the file is empty", "delete it, or export the transcript again")
    return [line.removesuffix("\r") for line in text.split("\n")]


def _read(path: Path, shown: str) -> list[tuple[Transcript, int | None]]:
    lines = _decode(path, shown)
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return [_read_record(line, shown, n) for n, line in enumerate(lines, start=1) if line.strip()]
    daic = path.name.lower().endswith(_DAIC)
    item_id = path.name[: -len(_DAIC)] if daic else path.stem
    turns = _read_daic(lines, shown) if suffix == ".csv" else _speaker_lines(lines, shown, None)
    return [(_transcript(item_id, turns, shown, None), None)]


def _transcript(item_id: str, turns: list[Turn], shown: str, line: int | None) -> Transcript:
    if not item_id.strip():
        raise InputError(shown, line, "the transcript has no id", "name it NNN_TRANSCRIPT.csv, or give an id")
    if not turns:
        raise InputError(shown, line, "no turn has both a speaker and text", "check that it is a transcript")
    return Transcript(item_id=item_id.strip(), turns=tuple(turns), source=shown)


def _read_daic(lines: list[str], shown: str) -> list[Turn]:
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
    turns: list[Turn] = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split("\t")]
        if len(fields) != len(header):
            problem = f"the row has {len(fields)} tab-separated fields, the header {len(header)}"
            fix = "replace a tab inside the text with a space; give a short row its empty fields"
            raise InputError(shown, number, problem, fix)
        start, stop = (_seconds(fields, col.get(c), c, shown, number) for c in ("start_time", "stop_time"))
        if fields[col["speaker"]] and fields[col["value"]]:
            turns.append(
                Turn(speaker=fields[col["speaker"]], text=fields[col["value"]], start=start, stop=stop)
            )
    return turns


def _seconds(fields: list[str], index: int | None, column: str, shown: str, line: int) -> float | None:
    if index is None or not fields[index]:
        return None
    try:
        return float(fields[index])
    except ValueError:
        problem = f"{column} '{fields[index]}' is not a number"
        raise InputError(shown, line, problem, "write seconds, e.g. 12.5, or leave it empty") from None


def _speaker_lines(lines: list[str], shown: str, at: int | None) -> list[Turn]:
    """`Speaker: text` lines; `at` is the JSONL line they came from, if they did."""
    turns: list[Turn] = []
    for number, line in enumerate(lines, start=1):
        match = _SPEAKER_LINE.fullmatch(line)
        if line.strip() and match is None:
            where = "the line" if at is None else f"line {number} of its 'text'"
            fix = "write one 'Speaker: text' turn per line; move files that are not transcripts elsewhere"
            raise InputError(shown, number if at is None else at, f"{where} lacks a 'Speaker:'", fix)
        if match and match[2].strip():
            turns.append(Turn(speaker=match[1], text=match[2].strip()))
    return turns


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
        speakers = ", ".join(sorted({t.speaker for t in transcript.turns}))
        problem = f"no turns left after data.drop_markers / data.participant_only (speakers: {speakers})"
        fix = f"name the subject one of {', '.join(sorted(PARTICIPANT_SPEAKERS))}, or turn those off"
        raise InputError(transcript.source, line, problem, fix)
    return transcript.model_copy(update={"turns": tuple(turns)})


_ITEM_FIELDS = tuple(re.sub(r"(?<!^)(?=[A-Z])", "_", item).lower() for item in PHQ8_ITEMS)
_LABEL_COLUMNS = {
    "participant_id": "item_id",
    "phq8_binary": "binary",
    "phq_binary": "binary",  # full_test_split.csv says PHQ_ where the others say PHQ8_
    "phq8_score": "score",
    "phq_score": "score",
    "gender": "gender",
    **{f"phq8_{item.lower()}": field for item, field in zip(PHQ8_ITEMS, _ITEM_FIELDS, strict=True)},
}
_LABEL_MAX = {"binary": 1, "score": 24, "gender": 1, **dict.fromkeys(_ITEM_FIELDS, 3)}


def load_labels(path: Path) -> dict[str, Phq8Label]:
    """PHQ-8 labels by participant id, from an AVEC2017 split CSV; absent columns read as None."""
    shown = str(path)
    if not path.is_file():
        raise InputError(shown, None, "no such file", "point data.labels at an AVEC2017 split CSV, or null")
    lines = _decode(path, shown)
    header = [h.strip().lower() for h in next(csv.reader([lines[0]]))]
    if "participant_id" not in header:
        problem = (
            f"the header has columns {', '.join(map(repr, header))}; expected Participant_ID, PHQ8_Binary, "
            "PHQ8_Score, Gender, PHQ8_NoInterest ... PHQ8_Moving (only Participant_ID is required)"
        )
        raise InputError(shown, 1, problem, "make line 1 the comma-separated AVEC2017 header")
    labels: dict[str, tuple[Phq8Label, int]] = {}
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cells = [c.strip() for c in next(csv.reader([line]))]
        if len(cells) != len(header):
            problem = f"the row has {len(cells)} comma-separated fields, the header {len(header)}"
            raise InputError(shown, number, problem, "give every column a value, empty when unknown")
        values: dict[str, Any] = {}
        for column, cell in zip(header, cells, strict=True):
            field = _LABEL_COLUMNS.get(column)
            if field == "item_id":
                values[field] = re.sub(r"^(\d+)\.0+$", r"\1", cell)  # pandas writes ids back as 300.0
            elif field is not None and cell:
                values[field] = _label_value(cell, column, field, shown, number)
        item_id = values.get("item_id", "")
        if not item_id:
            raise InputError(shown, number, "Participant_ID is empty", "fill it in, or delete the row")
        if item_id in labels:
            problem = f"participant {item_id} already has a label on line {labels[item_id][1]}"
            raise InputError(shown, number, problem, "keep one row per participant")
        labels[item_id] = (_checked(Phq8Label.model_validate(values), shown, number), number)
    if not labels:
        raise InputError(shown, 2, "the file has a header but no rows", "add one row per participant")
    return {item_id: label for item_id, (label, _) in labels.items()}


def _label_value(cell: str, column: str, field: str, shown: str, line: int) -> int:
    try:
        value = float(cell)
    except ValueError:
        value = float("nan")
    if not (value.is_integer() and 0 <= value <= _LABEL_MAX[field]):
        problem = f"{column} is '{cell}', not a whole number from 0 to {_LABEL_MAX[field]}"
        raise InputError(shown, line, problem, "correct it, or leave it empty when unknown")
    return int(value)


def _checked(label: Phq8Label, shown: str, line: int) -> Phq8Label:
    # The official files hold such slips (AVEC2017's binary label for 409): warn and keep the row.
    items = [getattr(label, field) for field in _ITEM_FIELDS]
    if label.score is not None and None not in items and sum(items) != label.score:
        warnings.warn(
            f"{shown}:{line}: PHQ8_Score {label.score} is not the item sum {sum(items)}", InputWarning, 3
        )
    if label.score is not None and label.binary is not None and label.binary != (label.score >= 10):
        warnings.warn(
            f"{shown}:{line}: PHQ8_Binary {label.binary} but PHQ8_Score {label.score}", InputWarning, 3
        )
    return label
