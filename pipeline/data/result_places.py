"""A stage's results file read once in full and then one item at a time, by where its line lies.

A report that shows its items in another order than the file's (the RAG page follows the rows
file; rag.jsonl is sorted by item) would hold every result to find each in turn. ResultPlaces
reads the file once, line by line as iter_jsonl reads it (same numbering, same errors), handing
each result on and keeping only its item's place: the line's offset, its number and a digest of
its text. `get(item)` reads that line again and refuses it, naming the file and the line, if its
text is not what the first read saw: what a page shows is what the numbers were counted from.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Generic

from pydantic import ValidationError

from pipeline.data.jsonl import R, check_results_file, line_text
from pipeline.errors import InputError
from pipeline.llm.project_files import validation_problem

FIX = "re-run the stage that writes it"


@dataclass(frozen=True)
class Place:
    offset: int  # where the line starts
    number: int  # the line's number, as iter_jsonl numbers it
    digest: bytes


def _digest(line: str) -> bytes:
    return hashlib.blake2b(line.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _placed_lines(path: Path) -> Iterator[tuple[Place, str]]:
    """jsonl._lines with each line's place."""
    check_results_file(path)
    offset = 0
    with path.open("rb") as handle:
        for number, chunk in enumerate(handle, start=1):
            line = line_text(chunk, path, number)
            yield Place(offset, number, _digest(line)), line
            offset += len(chunk)


def _parse(path: Path, number: int, line: str, model: type[R]) -> R:
    try:
        return model.model_validate_json(line)
    except ValidationError as exc:
        problem = f"not a {model.__name__} record ({validation_problem(path, exc)})"
        raise InputError(str(path), number, problem, FIX) from exc


class ResultPlaces(Generic[R]):
    """`scan()` once (every result, in file order, as iter_jsonl gives them), then `get(item)`; an
    item on several lines is its last, as a dict built from the results would keep it."""

    def __init__(self, path: Path, model: type[R], item: Callable[[R], str]) -> None:
        self.path, self.model, self._item = path, model, item
        self._places: dict[str, Place] = {}

    def scan(self) -> Iterator[R]:
        self._places.clear()
        for place, line in _placed_lines(self.path):
            result = _parse(self.path, place.number, line, self.model)
            self._places[self._item(result)] = place
            yield result

    def __contains__(self, item: object) -> bool:
        return item in self._places

    def get(self, item: str) -> R | None:
        """The result of `item`, read again from its line (None: no line of the scan held it)."""
        place = self._places.get(item)
        return None if place is None else read_at(self.path, place, self.model)


def read_at(path: Path, place: Place, model: type[R]) -> R:
    """The result on the line at `place`, refused (naming the file and the line) if its text is not
    what the scan that found the place saw."""
    with path.open("rb") as handle:
        handle.seek(place.offset)
        line = line_text(handle.readline(), path, place.number)
    if _digest(line) != place.digest:
        raise InputError(str(path), place.number, "changed while it was being read", FIX)
    return _parse(path, place.number, line, model)
