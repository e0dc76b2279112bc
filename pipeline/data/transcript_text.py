"""A transcript as the prompts show it: its turns kept as plain rows, its text rendered once.

A stage uses a transcript's rendered text, its id and the speakers' names, never its turns one by
one; yet each item of each stage read its interview as ~255 `Turn` models (a 20 kB DAIC-WOZ
interview: 119 of the 340 us its read cost, issue 33), and rendered the text again at every prompt.
Here the turns of a file read as text are rows (speaker, text, start, stop), checked as they were
read (pipeline.data.transcript_files); `Transcript.turns` makes the models, the same objects
`Turn(...)` gives, when a reader asks for them, and `text` is rendered once and kept. A JSONL
record's turns are validated as models (the record's schema), and kept as they are.

Cleaning (data.drop_markers, data.participant_only) works on the rows, and on the models where a
transcript holds them, so that a turn's every field reads as it did.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter

from pydantic import BaseModel, ConfigDict, TypeAdapter

from pipeline.data.settings import DataSettings
from pipeline.errors import InputError
from pipeline.llm.project_files import quoted

# The person assessed, compared case-insensitively: DAIC-WOZ and our AnnoMI conversion say
# "Participant"; AnnoMI itself and hand-written transcripts tend to say "client" or "patient".
PARTICIPANT_SPEAKERS = frozenset({"participant", "client", "patient", "subject"})
# Annotations, not speech: <sync>, <synch>, <laughter>, [laughter], [unintelligible 00:01:33].
_MARKER = re.compile(r"<[^<>\n]{1,40}>|\[[^\[\]\n]{1,40}\]")

Row = tuple[str, str, float | None, float | None]  # a turn: speaker, text, start, stop


class Turn(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    speaker: str
    text: str
    start: float | None = None
    stop: float | None = None


_SPEAKER = itemgetter(0)
# Turns made in one validation, each the object Turn(...) gives, in a third of the time.
_TURNS = TypeAdapter(list[Turn])


@dataclass(frozen=True, slots=True, init=False, eq=False, repr=False)
class Transcript:
    """One interview: its id, its turns, where it was read (`source`: relative to the root it was
    loaded from, when it lies under it) and how its prompts name and render it. Immutable; equal
    to another with the same fields and the same turns, field for field.

    `separator`: the original code joined `speaker + " : " + value`; data.speaker_separator
    chooses. `interviewer`, `participant`: the speakers the prompts name (data.interviewer,
    data.participant)."""

    item_id: str
    source: str
    separator: str
    interviewer: str
    participant: str
    _rows: tuple[Row, ...]
    _timed: bool  # rows made into turns with start and stop given (DAIC-WOZ), or without (text)
    _turns: tuple[Turn, ...] | None
    _text: str | None  # rendered with `separator` when first asked for

    def __init__(
        self,
        *,
        item_id: str,
        turns: Iterable[Turn],
        source: str,
        separator: str = " : ",
        interviewer: str = "Ellie",
        participant: str = "Participant",
    ) -> None:
        held = tuple(turns)
        for turn in held:
            if not isinstance(turn, Turn):
                raise TypeError(f"a transcript's turns are Turn models, not {type(turn).__name__}")
        rows = tuple((t.speaker, t.text, t.start, t.stop) for t in held)
        self._set(item_id, source, (separator, interviewer, participant), rows, False, held)

    @classmethod
    def of_rows(cls, item_id: str, rows: Sequence[Row], source: str, *, timed: bool) -> Transcript:
        """A transcript of rows checked as they were read; its turns are made when asked for, with
        start and stop given when `timed` (as a DAIC-WOZ row's were), else speaker and text only."""
        made = cls.__new__(cls)
        made._set(item_id, source, (" : ", "Ellie", "Participant"), tuple(rows), timed, None)
        return made

    def _set(
        self,
        item_id: str,
        source: str,
        names: tuple[str, str, str],
        rows: tuple[Row, ...],
        timed: bool,
        turns: tuple[Turn, ...] | None,
    ) -> None:
        for name, value in (
            ("item_id", item_id),
            ("source", source),
            ("separator", names[0]),
            ("interviewer", names[1]),
            ("participant", names[2]),
            ("_rows", rows),
            ("_timed", timed),
            ("_turns", turns),
            ("_text", None),
        ):
            object.__setattr__(self, name, value)

    @property
    def turns(self) -> tuple[Turn, ...]:
        if self._turns is None:
            keys = ("speaker", "text", "start", "stop") if self._timed else ("speaker", "text")
            made = tuple(_TURNS.validate_python([dict(zip(keys, row, strict=False)) for row in self._rows]))
            object.__setattr__(self, "_turns", made)
            return made
        return self._turns

    @property
    def rows(self) -> tuple[Row, ...]:
        """The turns as (speaker, text, start, stop), without making their models."""
        return self._rows

    @property
    def speakers(self) -> frozenset[str]:
        return frozenset(map(_SPEAKER, self._rows))

    @property
    def text(self) -> str:
        """The turns as the prompts show them, rendered once (a stage's prompts ask several times)."""
        if self._text is None:
            rendered = self.render(self.separator)
            object.__setattr__(self, "_text", rendered)
            return rendered
        return self._text

    def render(self, separator: str = ": ") -> str:
        return "\n".join([f"{speaker}{separator}{text}" for speaker, text, _, _ in self._rows])

    def named(self, settings: DataSettings) -> Transcript:
        """This transcript as data.speaker_separator, data.interviewer and data.participant name it."""
        names = (settings.speaker_separator, settings.interviewer, settings.participant)
        made = Transcript.__new__(Transcript)
        made._set(self.item_id, self.source, names, self._rows, self._timed, self._turns)
        return made

    def keeping(self, kept: list[int], texts: list[str] | None) -> Transcript:
        """The turns at `kept`, each with its text from `texts` when given."""
        rows = self._rows
        if texts is None:
            new_rows = tuple(rows[i] for i in kept)
        else:
            new_rows = tuple((rows[i][0], texts[i], rows[i][2], rows[i][3]) for i in kept)
        turns = self._turns
        if turns is not None:
            turns = tuple(
                turns[i] if texts is None else turns[i].model_copy(update={"text": texts[i]}) for i in kept
            )
        made = Transcript.__new__(Transcript)
        names = (self.separator, self.interviewer, self.participant)
        made._set(self.item_id, self.source, names, new_rows, self._timed, turns)
        return made

    def _fields(self) -> tuple[object, ...]:
        return (self.item_id, self._rows, self.source, self.separator, self.interviewer, self.participant)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Transcript):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return (
            f"Transcript(item_id={self.item_id!r}, turns={self.turns!r}, source={self.source!r}, "
            f"separator={self.separator!r}, interviewer={self.interviewer!r}, "
            f"participant={self.participant!r})"
        )


def clean(transcript: Transcript, settings: DataSettings, line: int | None) -> Transcript:
    """The transcript with markers dropped and only the person assessed kept, as data.drop_markers
    and data.participant_only ask; an InputError (at `line`, a JSONL line) when no turn is left."""
    if not (settings.drop_markers or settings.participant_only):
        return transcript
    rows = transcript.rows
    texts = None
    if settings.drop_markers:
        texts = [" ".join(_MARKER.sub(" ", text).split()) for _, text, _, _ in rows]
    kept = list(range(len(rows))) if texts is None else [i for i, text in enumerate(texts) if text]
    if settings.participant_only:
        kept = [i for i in kept if rows[i][0].casefold() in PARTICIPANT_SPEAKERS]
    if not kept:
        raise nothing_left(transcript.speakers, transcript.source, line)
    return transcript.keeping(kept, texts)


def nothing_left(speakers: Iterable[str], source: str, line: int | None) -> InputError:
    listed = ", ".join(sorted(set(speakers)))
    problem = (
        f"no turns left after data.drop_markers / data.participant_only (speakers: {quoted(source, listed)})"
    )
    fix = f"name the subject one of {', '.join(sorted(PARTICIPANT_SPEAKERS))}, or turn those off"
    return InputError(source, line, problem, fix)
