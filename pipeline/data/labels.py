"""PHQ-8 labels (AVEC2017 split files), and choosing the participants they list.

A DAIC-WOZ release ships its splits as CSVs next to the transcripts: train_split_Depression_AVEC2017
.csv (107 participants), dev_split (35) and test_split (47; no item columns). The paper's judge
experiment (Figure 2) ran 142 participants: train and dev. `data.labels` names such files, and a
run then covers exactly the participants they list, in item-id order, before `data.limit`.

The files must lie inside `data.transcripts`: every stage that loads transcripts depends on that
folder in dvc.yaml, so a label file edited there re-runs them, where one elsewhere would not.
"""

from __future__ import annotations

import csv
import io
import re
import warnings
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from pipeline.data.input_files import (
    COLUMN_FIX,
    InputWarning,
    plain_number,
    read_lines,
    repeated_column,
    shown_path,
)
from pipeline.data.settings import DataSettings
from pipeline.errors import ConfigError, InputError
from pipeline.llm.project_files import quoted

PHQ8_ITEMS = ("NoInterest", "Depressed", "Sleep", "Tired", "Appetite", "Failure", "Concentrating", "Moving")


class Phq8Label(BaseModel):
    """One row of an AVEC2017 split file. The test split has no item columns: those stay None."""

    model_config = ConfigDict(frozen=True, extra="forbid")

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
    return {item_id: label for item_id, (label, _) in label_rows(path, str(path)).items()}


def label_rows(path: Path, shown: str) -> dict[str, tuple[Phq8Label, int]]:
    """Like load_labels, with the line each label was read from; `shown` names the file in errors."""
    if not path.is_file():
        raise InputError(shown, None, "no such file", "point data.labels at an AVEC2017 split CSV, or null")
    # The csv module, not a split on line ends: a quoted cell may hold a newline. Each record is
    # reported by the line it starts on.
    reader = csv.reader(io.StringIO("\n".join(read_lines(path, shown))), strict=True)
    header = _header(reader, shown)
    labels: dict[str, tuple[Phq8Label, int]] = {}
    while True:
        number = reader.line_num + 1
        try:
            row = next(reader, None)
        except csv.Error as exc:
            raise InputError(shown, number, f"not CSV ({exc})", "close the quoted cell") from exc
        if row is None:
            break
        if not any(cell.strip() for cell in row):
            continue
        cells = [c.strip() for c in row]
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
    return labels


def _header(reader: Any, shown: str) -> list[str]:
    """Line 1's column names (stripped, lower case), checked: Participant_ID among them, no field
    given by two columns."""
    try:
        header = [h.strip().lower() for h in next(reader, [])]
    except csv.Error as exc:
        raise InputError(shown, 1, f"not CSV ({exc})", "close the quoted cell") from exc
    if "participant_id" not in header:
        problem = (
            f"the header has columns {quoted(shown, ', '.join(map(repr, header)))}; expected Participant_ID, "
            "PHQ8_Binary, "
            "PHQ8_Score, Gender, PHQ8_NoInterest ... PHQ8_Moving (only Participant_ID is required)"
        )
        raise InputError(shown, 1, problem, "make line 1 the comma-separated AVEC2017 header")
    if (twice := repeated_column(header, [_LABEL_COLUMNS.get(h) for h in header])) is not None:
        raise InputError(shown, 1, twice, COLUMN_FIX)
    return header


def _label_value(cell: str, column: str, field: str, shown: str, line: int) -> int:
    value = plain_number(cell)
    if not (value.is_integer() and 0 <= value <= _LABEL_MAX[field]):
        given = quoted(shown, "'" + cell + "'")
        problem = f"{column} is {given}, not a whole number from 0 to {_LABEL_MAX[field]}"
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


def label_files(settings: DataSettings) -> tuple[str, ...]:
    labels = settings.labels
    if labels is None:
        return ()
    files = (labels,) if isinstance(labels, str) else tuple(labels)
    if not files:
        raise ConfigError(
            "data.labels is an empty list. Fix: null for every transcript, or name split files."
        )
    return files


def listed_participants(settings: DataSettings, root: Path) -> dict[str, tuple[str, int]]:
    """Each participant that data.labels lists, with the file and line that lists it; empty when
    data.labels is null. The files are checked as load_labels checks them."""
    seen: dict[str, tuple[str, int]] = {}
    folder = (root / settings.transcripts).resolve()
    for name in label_files(settings):
        path = root / name
        if not path.resolve().is_relative_to(folder):
            raise ConfigError(
                f"data.labels: {name} lies outside data.transcripts ({settings.transcripts}). The stages "
                "depend on that folder in dvc.yaml, so a label file elsewhere could change without "
                f"them re-running. Fix: move it into {settings.transcripts}/ and point data.labels there."
            )
        shown = shown_path(path, root)
        for item_id, (_, line) in label_rows(path, shown).items():
            if item_id in seen:
                first, at = seen[item_id]
                problem = f"participant {item_id} is already listed in {first}:{at}"
                raise InputError(shown, line, problem, "list each participant in one data.labels file")
            seen[item_id] = (shown, line)
    return seen
