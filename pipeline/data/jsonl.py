"""What the stages write: one JSON line per item, sorted by item, in canonical JSON.

Same results, same bytes: a replay must reproduce every output exactly.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from pipeline.errors import InputError
from pipeline.llm.files import atomic_write
from pipeline.llm.keys import canonical_json


class Result(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


R = TypeVar("R", bound=Result)


def write_jsonl(path: Path, results: Iterable[Result]) -> None:
    rows = sorted(results, key=lambda r: str(getattr(r, "item", "")))
    atomic_write(path, "".join(canonical_json(r.model_dump(mode="json")) + "\n" for r in rows))


def read_jsonl(path: Path, model: type[R]) -> list[R]:
    if not path.exists():
        raise InputError(str(path), None, "file not found", "run the stage that writes it first (dvc repro)")
    out: list[R] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            out.append(model.model_validate_json(line))
        except ValidationError as exc:
            raise InputError(
                str(path), number, f"not a {model.__name__} record ({exc})", "re-run the stage that writes it"
            ) from exc
    return out
