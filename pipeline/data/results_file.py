"""A stage's results file read again an item at a time, for a later stage that needs them all.

A stage that reads an earlier stage's results (refine reads the assessments and the judgements)
held them whole while it ran: at a million calls that is the run's every assessment and judgement
(issue 33). ResultsFile scans the file once, keeping each line's place and a digest of its text
(pipeline.data.result_places), and reads a result again from its line each time it is asked for:
by item, or all of them in the file's order (one sequential read), refusing any line whose text is
not what the scan saw.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from pipeline.data.jsonl import R
from pipeline.data.result_places import FIX, Place, _parse, _placed_lines, read_at
from pipeline.errors import InputError
from pipeline.llm.project_files import quoted


class ResultsFile(Generic[R]):
    """The results in the file's order (read again from the file at each pass), and by item."""

    def __init__(self, path: Path, model: type[R], item: Callable[[R], str]) -> None:
        self.path, self.model = path, model
        self._places: dict[str, Place] = {}
        self._order: list[Place] = []
        for place, line in _placed_lines(path):
            name = item(_parse(path, place.number, line, model))
            if name in self._places:  # one line an item, as a stage writes them
                problem = f"item {quoted(path, repr(name))} is on an earlier line too"
                raise InputError(str(path), place.number, problem, FIX)
            self._places[name] = place
            self._order.append(place)

    def __iter__(self) -> Iterator[R]:
        lines = _placed_lines(self.path)
        for expected in self._order:
            place, line = next(lines, (None, ""))
            if place != expected:
                raise InputError(str(self.path), expected.number, "changed while it was being read", FIX)
            yield _parse(self.path, expected.number, line, self.model)
        if next(lines, None) is not None:
            raise InputError(str(self.path), len(self._order) + 1, "changed while it was being read", FIX)

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, item: object) -> bool:
        return item in self._places

    def __getitem__(self, item: str) -> R:
        place = self._places.get(item)
        if place is None:
            raise KeyError(item)
        return read_at(self.path, place, self.model)


Rc = TypeVar("Rc", covariant=True)


class ByItem(Protocol[Rc]):
    """Results looked up by item: a dict of them, or a ResultsFile."""

    def __getitem__(self, item: str) -> Rc: ...

    def __contains__(self, item: object) -> bool: ...
