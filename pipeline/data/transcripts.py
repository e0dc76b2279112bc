"""Interview transcripts in, typed and checked; `data.labels` can narrow them (pipeline.data.labels).

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

import re
import warnings
from array import array
from bisect import bisect_left
from collections.abc import Container, Iterator, Mapping, Sequence
from hashlib import sha256
from pathlib import Path
from typing import overload

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from pipeline.data.input_files import InputWarning, decode, read_lines, read_text, shown_path
from pipeline.data.labels import listed_participants
from pipeline.data.settings import DataSettings
from pipeline.data.transcript_places import SEARCHED as SEARCHED
from pipeline.data.transcript_places import Places, found
from pipeline.errors import ConfigError, InputError

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


def load_transcripts(settings: DataSettings, root: Path = Path(".")) -> list[Transcript]:
    """Every transcript under `settings.transcripts`, cleaned as asked, in item-id order."""
    return list(index_transcripts(settings, root))


class Transcripts(Sequence[Transcript]):
    """The transcripts a design reads, in item-id order, each read from its file when asked for and
    not kept (issue 33: 100k interviews held as turns took 17 GB). Every one was read and checked
    once when the index was made, so a bad input is refused before any item runs; a transcript is
    the same object, field for field, as `load_transcripts` gave when it held them all. Where each
    lies is packed (pipeline.data.transcript_places), a row an id, and an id is found by its place
    in the order (the ids are sorted, none twice), not through a dict."""

    def __init__(self, settings: DataSettings, ids: list[str], places: Places) -> None:
        self._settings = settings
        self.ids = ids
        self._places = places

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, index: int) -> Transcript: ...
    @overload
    def __getitem__(self, index: slice) -> list[Transcript]: ...
    def __getitem__(self, index: int | slice) -> Transcript | list[Transcript]:
        if isinstance(index, slice):
            return [self._read(row) for row in range(len(self.ids))[index]]
        return self._read(range(len(self.ids))[index])

    def row(self, item_id: object) -> int:
        """`item_id`'s place in `ids` (a KeyError for an id not indexed)."""
        if isinstance(item_id, str):
            at = bisect_left(self.ids, _id_order(item_id), key=_id_order)
            if at < len(self.ids) and self.ids[at] == item_id:
                return at
        raise KeyError(item_id)

    def get(self, item_id: str) -> Transcript:
        """The transcript of `item_id` (a KeyError for an id not indexed), read and cleaned now."""
        return self._read(self.row(item_id))

    def _read(self, row: int) -> Transcript:
        places = self._places
        path, shown, line = places.path(row), places.shown(row), places.line(row)
        if _stamp(path) != places.stamp(row):
            problem = f"the file changed since it was read for item '{self.ids[row]}' at the stage's start"
            fix = "leave the inputs as they are while a stage runs"
            raise InputError(shown, line, problem, fix)
        transcript = _read_one(path, shown, line, places.span(row))
        return _named(_clean(transcript, self._settings, line), self._settings)

    @property
    def by_id(self) -> Mapping[str, Transcript]:
        """The same transcripts by item id, each read when asked for."""
        return _ById(self)


class _ById(Mapping[str, Transcript]):
    def __init__(self, transcripts: Transcripts) -> None:
        self._transcripts = transcripts

    def __getitem__(self, item_id: str) -> Transcript:
        return self._transcripts.get(item_id)

    def __iter__(self) -> Iterator[str]:
        return iter(self._transcripts.ids)

    def __len__(self) -> int:
        return len(self._transcripts)


def index_transcripts(settings: DataSettings, root: Path = Path(".")) -> Transcripts:
    """Every transcript under `settings.transcripts`, read and checked one at a time, as an index
    of item id -> file (and JSONL line) in item-id order; `load_transcripts` with nothing held."""
    if settings.limit is not None and settings.limit < 0:
        raise ConfigError(f"data.limit is {settings.limit}. Fix: a count of 0 or more, or null for all.")
    folder = root / settings.transcripts
    indexing = _Indexing(Places(folder, root))
    for file in found(folder, root):
        path = folder / file if file else folder
        shown, stamp = shown_path(path, root), _stamp(path)
        for item_id, (line, span), said in _index_file(path, shown, stamp, settings, indexing):
            indexing.add(item_id, file, shown, stamp, line, span, said)
    return indexing.done(settings, root)


class _Indexing(Mapping[str, tuple[str, "int | None"]]):
    """An index being made: a row a transcript as its file was read (Places), its id and speakers.
    By id, where the transcript lies (its file's name shown, its line), for an error naming it."""

    def __init__(self, places: Places) -> None:
        self.places = places
        self.ids: list[str] = []
        self._seen: set[str] = set()
        self._speakers: dict[frozenset[str], int] = {}  # each distinct set of speakers: its number
        self._said = array("q")  # by row: its speakers' number

    def add(
        self,
        item_id: str,
        file: str,
        shown: str,
        stamp: tuple[int, int],
        line: int | None,
        span: tuple[int, int] | None,
        said: frozenset[str],
    ) -> None:
        self.places.add(file, shown, stamp, line, span)
        self.ids.append(item_id)
        self._seen.add(item_id)
        self._said.append(self._speakers.setdefault(said, len(self._speakers)))

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._seen

    def __getitem__(self, item_id: str) -> tuple[str, int | None]:
        row = self.places.first(lambda row: self.ids[row] == item_id) if item_id in self._seen else None
        if row is None:
            raise KeyError(item_id)
        return self.places.shown(row), self.places.line(row)

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids)

    def __len__(self) -> int:
        return len(self.ids)

    def done(self, settings: DataSettings, root: Path) -> Transcripts:
        """The index: its ids in item-id order, only those data.labels lists, up to data.limit."""
        ids = self.ids
        rows = sorted(range(len(ids)), key=lambda row: _id_order(ids[row]))
        if settings.labels is not None:
            listed = _listed([ids[row] for row in rows], settings, root)
            rows = [row for row in rows if ids[row] in listed]
        chosen = rows if settings.limit is None else rows[: settings.limit]
        by_number = list(self._speakers)
        _warn_unnamed_speakers(
            [by_number[number] for number in {self._said[row] for row in chosen}], settings
        )
        return Transcripts(settings, [ids[row] for row in chosen], self.places.rows(chosen))


# Files this process has read and checked for an index: a digest of (name, the cleaning settings,
# the file's bytes) -> each transcript's id, JSONL line and span, and speakers once cleaned. A
# stage's items, status' dry run of each stage and the bench's in-process stages index the same
# files again; a file whose bytes were checked with the same cleaning is then only hashed (issue 33).
# Ids, lines and speakers only (each distinct set of speakers once), never the text. Full at
# _CHECKED_FILES, it keeps what it holds and takes no more: every stage reads the files in the same
# order, so a memo cleared when full held, at each pass, only the last files of the one before,
# which the next pass reaches last, after clearing them (a million files: no file found again).
_Checked = tuple[tuple[str, int | None, tuple[int, int] | None, frozenset[str]], ...]
_checked: dict[bytes, _Checked] = {}
_speaker_sets: dict[frozenset[str], frozenset[str]] = {}
_CHECKED_FILES = 200_000
_At = tuple[int | None, tuple[int, int] | None]  # a transcript's JSONL line and byte span, or none


def _checked_key(path: Path, settings: DataSettings) -> bytes:
    name = path.name.encode("utf-8", "surrogatepass")
    digest = sha256(len(name).to_bytes(4, "little") + name)
    digest.update(bytes([settings.drop_markers, settings.participant_only]))
    digest.update(path.read_bytes())
    return digest.digest()


def _index_file(
    path: Path,
    shown: str,
    stamp: tuple[int, int],
    settings: DataSettings,
    found: Mapping[str, tuple[str, int | None]],
) -> Iterator[tuple[str, _At, frozenset[str]]]:
    """Each transcript of the file: its id, where it lies, its speakers once cleaned; read and
    checked (ids unique against `found`), or only hashed when this process checked the same bytes
    under the same name and cleaning before. `stamp`: the file's, taken before it was hashed."""
    key = _checked_key(path, settings)
    remembered = _checked.get(key)
    if remembered is not None:
        for item_id, line, span, said in remembered:
            _unique(item_id, shown, line, found)
            yield item_id, (line, span), said
        return
    seen: list[tuple[str, int | None, tuple[int, int] | None, frozenset[str]]] = []
    for item_id, (line, span), said in _checked_transcripts(path, shown, settings, found):
        shared = _speaker_sets.setdefault(said, said) if len(_checked) < _CHECKED_FILES else said
        seen.append((item_id, line, span, shared))
        yield item_id, (line, span), said
    if _stamp(path) == stamp and len(_checked) < _CHECKED_FILES:  # (the bytes hashed were those read)
        _checked[key] = tuple(seen)


def _checked_transcripts(
    path: Path, shown: str, settings: DataSettings, found: Mapping[str, tuple[str, int | None]]
) -> Iterator[tuple[str, _At, frozenset[str]]]:
    """The file's transcripts read and checked: ids, where each lies, speakers once cleaned. A
    .csv file (one DAIC-WOZ transcript) is checked from its rows without building its ~250 turns,
    which its item builds when it runs (issue 33): the same checks and errors, in the same order."""
    if path.suffix.lower() != ".csv":
        for transcript, line, span in _read_indexed(path, shown):
            _unique(transcript.item_id, shown, line, found)
            cleaned = _clean(transcript, settings, line)
            yield transcript.item_id, (line, span), frozenset(turn.speaker for turn in cleaned.turns)
        return
    daic = path.name.lower().endswith(_DAIC)
    item_id = path.name[: -len(_DAIC)] if daic else path.stem
    rows = _daic_rows(read_lines(path, shown), shown)
    _check_whole(item_id, bool(rows), shown, None)
    _unique(item_id.strip(), shown, None, found)
    pairs = [(str(row["speaker"]), str(row["text"])) for row in rows]
    yield item_id.strip(), (None, None), _cleaned_speakers(pairs, settings, shown)


def _cleaned_speakers(pairs: list[tuple[str, str]], settings: DataSettings, source: str) -> frozenset[str]:
    """The speakers of the (speaker, text) turns `_clean` keeps, or its error."""
    kept = pairs
    if settings.drop_markers:
        unmarked = ((said, " ".join(_MARKER.sub(" ", text).split())) for said, text in kept)
        kept = [(said, text) for said, text in unmarked if text]
    if settings.participant_only:
        kept = [(said, text) for said, text in kept if said.casefold() in PARTICIPANT_SPEAKERS]
    if not kept:
        raise _nothing_left({said for said, _ in pairs}, source, None)
    return frozenset(said for said, _ in kept)


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


def _warn_unnamed_speakers(said: list[frozenset[str]], settings: DataSettings) -> None:
    """A warning when no transcript has either speaker the prompts name: the prompt would tell the
    model about an interviewer and a person assessed who are not in the transcript. `said`: each
    chosen transcript's speakers."""
    wanted = {settings.interviewer.lower(), settings.participant.lower()}
    speakers: set[str] = set().union(*said)
    if not said or wanted & {s.lower() for s in speakers}:
        return
    warnings.warn(
        f"no transcript under {settings.transcripts} has the speakers the prompts name, "
        f"'{settings.interviewer}' (the interviewer) and '{settings.participant}' (the person "
        f"assessed); their speakers: {', '.join(sorted(speakers)[:6])}. Fix: set data.interviewer "
        "and data.participant to the names your transcripts use.",
        InputWarning,
        stacklevel=2,
    )


def _listed(item_ids: list[str], settings: DataSettings, root: Path) -> Container[str]:
    """The participants data.labels lists (pipeline.data.labels), each of whom needs a transcript."""
    listed = listed_participants(settings, root)
    have = set(item_ids)
    missing = [item_id for item_id in listed if item_id not in have]
    if missing:
        shown, line = listed[missing[0]]
        more = f" (and {len(missing) - 1} more: {', '.join(missing[1:6])}" if len(missing) > 1 else ""
        more += ", ...)" if len(missing) > 6 else (")" if more else "")
        problem = f"participant {missing[0]}{more} has no transcript in {settings.transcripts}"
        raise InputError(shown, line, problem, "add the transcript, or delete the row from the label file")
    return listed


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


def _stamp(path: Path) -> tuple[int, int]:
    status = path.stat()
    return status.st_size, status.st_mtime_ns


def _read_one(path: Path, shown: str, line: int | None, span: tuple[int, int] | None) -> Transcript:
    """The transcript at `line` and `span` of the file, read again (a JSONL line alone, by its
    bytes), or the file's one transcript."""
    if span is None or line is None:
        return _read_file(path, shown)
    start, size = span
    with path.open("rb") as raw:
        raw.seek(start)
        text = decode(raw.read(size), shown).removesuffix("\r")
    return _read_record(text, shown, line)[0]


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
