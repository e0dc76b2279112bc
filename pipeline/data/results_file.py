"""A stage's results file read again an item at a time, for a later stage that needs them all.

A stage that reads an earlier stage's results (refine reads the assessments and the judgements)
held them whole while it ran: at a million calls that is the run's every assessment and judgement
(issue 33). ResultsFile scans the file once (ResultPlaces: each line's place and a digest of its
text, nothing else kept) and reads a result again from its line each time it is asked for, by item
or in the file's order, refusing a line whose text is not what the scan saw.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from pipeline.data.jsonl import R
from pipeline.data.result_places import FIX, ResultPlaces
from pipeline.errors import InputError


class ResultsFile(Generic[R]):
    """The results in the file's order (iterated again from the file each time), and by item."""

    def __init__(self, path: Path, model: type[R], item: Callable[[R], str]) -> None:
        self.path = path
        self._places = ResultPlaces(path, model, item)
        self._items: list[str] = []
        seen: set[str] = set()
        for number, result in enumerate(self._places.scan(), start=1):
            name = item(result)
            if name in seen:  # one line an item, as a stage writes them: two would be read as the last
                raise InputError(str(path), number, f"item {name!r} is on an earlier line too", FIX)
            seen.add(name)
            self._items.append(name)

    def __iter__(self) -> Iterator[R]:
        for name in self._items:
            yield self[name]

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, item: object) -> bool:
        return item in self._places

    def __getitem__(self, item: str) -> R:
        result = self._places.get(item)
        if result is None:
            raise KeyError(item)
        return result


Rc = TypeVar("Rc", covariant=True)


class ByItem(Protocol[Rc]):
    """Results looked up by item: a dict of them, or a ResultsFile."""

    def __getitem__(self, item: str) -> Rc: ...

    def __contains__(self, item: object) -> bool: ...
