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
from pipeline.llm.files import atomic_write
from pipeline.llm.keys import canonical_json


class Result(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


R = TypeVar("R", bound=Result)


def write_records(path: Path, records: Iterable[Mapping[str, Any]]) -> None:
    """One canonical JSON line per record, in the order given; a kill leaves the old file whole."""
    atomic_write(path, "".join(canonical_json(r) + "\n" for r in records))


def write_jsonl(path: Path, results: Iterable[Result]) -> None:
    rows = sorted(results, key=lambda r: str(getattr(r, "item", "")))
    write_records(path, (r.model_dump(mode="json") for r in rows))


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    if not path.exists():
        raise InputError(str(path), None, "file not found", "run the stage that writes it first (dvc repro)")
    yield from enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)


def read_jsonl(path: Path, model: type[R]) -> list[R]:
    out: list[R] = []
    for number, line in _lines(path):
        try:
            out.append(model.model_validate_json(line))
        except ValidationError as exc:
            raise InputError(
                str(path), number, f"not a {model.__name__} record ({exc})", "re-run the stage that writes it"
            ) from exc
    return out


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
