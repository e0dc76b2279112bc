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

Here: the index of a design's transcripts, each read again when its item runs. A transcript and
its rendered text: pipeline.data.transcript_text; a file read and checked: .transcript_files; the
files this process has checked already: .transcript_memo; where each transcript lies: .transcript_places;
a file opened, and read again only if it is the file the index read: .transcript_open.
"""

from __future__ import annotations

import os
import warnings
from array import array
from bisect import bisect_left
from collections.abc import Container, Iterator, Mapping, Sequence
from pathlib import Path
from typing import overload

from pipeline.data.input_files import InputWarning, shown_path
from pipeline.data.item_ids import composed as _composed
from pipeline.data.labels import listed_participants
from pipeline.data.settings import DataSettings
from pipeline.data.transcript_files import read_one
from pipeline.data.transcript_memo import index_file
from pipeline.data.transcript_open import Identity, read_again, read_listed
from pipeline.data.transcript_places import SEARCHED as SEARCHED
from pipeline.data.transcript_places import Places, ShownNames, listed
from pipeline.data.transcript_text import PARTICIPANT_SPEAKERS as PARTICIPANT_SPEAKERS
from pipeline.data.transcript_text import Transcript as Transcript
from pipeline.data.transcript_text import Turn as Turn
from pipeline.data.transcript_text import clean
from pipeline.errors import ConfigError, InputError
from pipeline.llm.project_files import quoted


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
        data = read_again(path, shown, line, places.identity(row), places.span(row), self.ids[row])
        transcript = read_one(path, shown, line, data)
        return clean(transcript, self._settings, line).named(self._settings)

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
    files = listed(folder, root)
    inside = None if files.files == [""] else os.path.realpath(folder)  # a file named itself is trusted
    shown_folder = shown_path(folder, root)
    shown_as = ShownNames(folder, root, files.linked)  # no realpath a file (issue 33)
    for file in files.files:
        path = folder / file if file else folder
        shown = shown_as(file)
        # What lies there now, asked of the descriptor read; an error names the entry as listed.
        data, identity = read_listed(path, f"{shown_folder}/{file}" if file else shown, inside)
        for item_id, (line, span), said in index_file(path, shown, data, settings, indexing):
            indexing.add(item_id, file, shown, identity, line, span, said)
    return indexing.done(settings, root)


class _Indexing(Mapping[str, tuple[str, "int | None", str]]):
    """An index being made: a row a transcript as its file was read (Places), its id and speakers.
    By id, where the transcript of that id lies (its file's name shown, its line) and the id as it
    is spelled there, for an error naming it: ids compare in Unicode's composed form (NFC), so that
    `é` written as one code point and as `e` and an accent, which look the same, are one id."""

    def __init__(self, places: Places) -> None:
        self.places = places
        self.ids: list[str] = []
        self._seen: set[str] = set()  # each id in its composed form
        self._speakers: dict[frozenset[str], int] = {}  # each distinct set of speakers: its number
        self._said = array("q")  # by row: its speakers' number

    def add(
        self,
        item_id: str,
        file: str,
        shown: str,
        identity: Identity,
        line: int | None,
        span: tuple[int, int] | None,
        said: frozenset[str],
    ) -> None:
        self.places.add(file, shown, identity, line, span)
        self.ids.append(item_id)
        self._seen.add(_composed(item_id))
        self._said.append(self._speakers.setdefault(said, len(self._speakers)))

    def __contains__(self, item_id: object) -> bool:
        return isinstance(item_id, str) and _composed(item_id) in self._seen

    def __getitem__(self, item_id: str) -> tuple[str, int | None, str]:
        composed = _composed(item_id)
        seen = composed in self._seen
        row = self.places.first(lambda row: _composed(self.ids[row]) == composed) if seen else None
        if row is None:
            raise KeyError(item_id)
        return self.places.shown(row), self.places.line(row), self.ids[row]

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
        problem = (
            f"participant {quoted(shown, missing[0] + more)} has no transcript in {settings.transcripts}"
        )
        fix = "add the transcript, or delete the row from the label file"
        if (look_alike := _look_alike(missing[0], item_ids)) is not None:
            problem += f": the transcript {quoted(shown, repr(look_alike[0]))} spells that id {look_alike[1]}"
            fix = "write the id in the label file as the transcript's name spells it"
        raise InputError(shown, line, problem, fix)
    return listed


def _look_alike(wanted: str, item_ids: list[str]) -> tuple[str, str] | None:
    """A transcript's id that names `wanted` in another spelling, and how it differs: in another
    Unicode form (NFC against NFD), or only in case: ids match exactly, case too, so that 'P01' and
    'p01' stay two items; a label file written as 'p01' for the transcript P01_TRANSCRIPT.csv (as
    macOS and Windows, which ignore case in file names, may let a user think them one) is told so."""
    composed = _composed(wanted)
    if (same := next((i for i in item_ids if _composed(i) == composed), None)) is not None:
        return same, "in another Unicode form"
    folded = composed.casefold()
    if (same := next((i for i in item_ids if _composed(i).casefold() == folded), None)) is not None:
        return same, "in another case"
    return None


def _id_order(item_id: str) -> tuple[int, int, str]:
    # Numbers in numeric order (DAIC 300..492 before a 1000), any other ids after them.
    numeric = item_id.isascii() and item_id.isdigit()
    return (0, int(item_id), item_id) if numeric else (1, 0, item_id)
