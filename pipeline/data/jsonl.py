"""What the stages write: one canonical JSON line per result, written whole or not at all.

Same results, same bytes: a replay must reproduce every output exactly. `write_jsonl` and
`read_jsonl` keep typed results (pydantic models) sorted by item; `write_records` and `read_records`
keep plain records in the order given, for a design whose records are built by hand (the selection).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from pipeline.errors import InputError
from pipeline.llm.files import atomic_write_chunks
from pipeline.llm.keys import canonical_json


class Result(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


R = TypeVar("R", bound=Result)


def write_records(path: Path, records: Iterable[Mapping[str, Any]]) -> None:
    """One canonical JSON line per record, in the order given; a kill leaves the old file whole.
    Written a line at a time: the refine stage's output holds each round's 20 kB prompt (3 kB a
    call), and joining it whole held it twice over at the end of the stage (issue 33)."""
    atomic_write_chunks(path, (canonical_json(r) + "\n" for r in records))


def write_jsonl(path: Path, results: Iterable[Result]) -> None:
    rows = sorted(results, key=lambda r: str(getattr(r, "item", "")))
    write_records(path, (r.model_dump(mode="json") for r in rows))


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """The file's lines as str.splitlines() of its whole text numbers them, read a line at a time:
    a chunk up to each b"\n" is split again as splitlines splits (\r, \x85, \u2028, ...), which
    cuts the whole text at the same places, so a reader never holds the file whole."""
    if not path.exists():
        raise InputError(str(path), None, "file not found", "run the stage that writes it first (dvc repro)")
    number = 0
    with path.open("rb") as handle:
        for chunk in handle:
            for line in chunk.decode("utf-8").splitlines():
                number += 1
                yield number, line


def iter_jsonl(path: Path, model: type[R]) -> Iterator[R]:
    """read_jsonl one result at a time: each line parsed when reached, nothing kept (a file of a
    run's results can be far larger than what a reader needs of it at once)."""
    for number, line in _lines(path):
        try:
            yield model.model_validate_json(line)
        except ValidationError as exc:
            raise InputError(
                str(path), number, f"not a {model.__name__} record ({exc})", "re-run the stage that writes it"
            ) from exc


def read_jsonl(path: Path, model: type[R]) -> list[R]:
    return list(iter_jsonl(path, model))


def read_records(path: Path) -> list[dict[str, Any]]:
    records = []
    for number, line in _lines(path):
        try:
            records.append(orjson.loads(line))
        except orjson.JSONDecodeError as exc:
            raise InputError(
                str(path), number, f"not a JSON line ({exc})", "re-run the stage that writes it"
            ) from None
    return records
