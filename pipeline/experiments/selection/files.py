"""Where the selection's stages write, and how: one canonical JSON line per request, in file order,
so a replay writes the same bytes."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from pipeline.errors import InputError
from pipeline.llm.files import atomic_write
from pipeline.llm.keys import canonical_json

OUT_DIR = Path("outputs/selection")
SCORES = OUT_DIR / "scores.jsonl"
PICKS = OUT_DIR / "picks.jsonl"
METRICS = OUT_DIR / "metrics.json"
PAGE = OUT_DIR / "report.html"


def write_records(path: Path, records: Iterable[dict[str, Any]]) -> None:
    atomic_write(path, "".join(canonical_json(r) + "\n" for r in records))


def read_records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        raise InputError(str(path), None, "file not found", "run the stage that writes it first (dvc repro)")
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            records.append(orjson.loads(line))
        except orjson.JSONDecodeError as exc:
            raise InputError(
                str(path), number, f"not a JSON line ({exc})", "re-run the stage that writes it"
            ) from None
    return records
