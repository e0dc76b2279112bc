"""A dry-run stage's results on disk rather than in memory, in `judgeloop status`.

A stage's results were held whole by the prediction: every stage's, until the end (status kept each
stage's probe, and its results with it), and the last one twice more, as two byte strings, when its
output was compared with the file on disk (bench/README, issue 33: 6 kB a call of status --all's
peak at 10k calls, the refinement's results being 3.3 kB a call). Here each result is written as it
comes, with the stage's own Output.write (the very bytes the stage writes), to a file in a folder of
the prediction's; the stage's probe keeps only each result's item and whether its text holds a
reply not known yet. The file is compared with the stage's output a block at a time, and the next
stage of the design reads it again as the stage runner's upstream reads the stage's own file (an
item at a time where the output allows: pipeline.experiments.steps.FromFiles): what the real run
will read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from pipeline.experiments.steps import Output
from pipeline.tools.status.probe import MARK

R = TypeVar("R")
BLOCK = 1 << 20


@dataclass(frozen=True, slots=True)
class Kept:
    """What the prediction keeps of one result: its item, and whether its text holds a placeholder."""

    item: str
    unknown: bool


def _unwritten(path: Path, results: Iterable[Kept]) -> None:
    raise TypeError("a dry-run result is written by DryResults.write, as it comes")


KEPT: Output[Kept] = Output(lambda kept: kept.item, lambda kept: MARK if kept.unknown else "", _unwritten)


class DryResults(Generic[R]):
    """One stage's dry-run results, written as they come to `path` (the stage's Output.write)."""

    def __init__(self, output: Output[R], path: Path) -> None:
        self.output, self.path = output, path
        self.kept: list[Kept] = []

    def write(self, results: Iterable[R]) -> list[Kept]:
        output, kept = self.output, self.kept

        def passing() -> Iterator[R]:
            for result in results:
                kept.append(Kept(output.item_of(result), MARK in output.text_of(result)))
                yield result

        output.write(self.path, passing())
        return kept

    def differs_from(self, path: Path) -> bool:
        """Whether the stage's output file would change: compared a block at a time, never read whole."""
        if not path.exists() or path.stat().st_size != self.path.stat().st_size:
            return True
        with self.path.open("rb") as ours, path.open("rb") as theirs:
            while block := ours.read(BLOCK):
                if block != theirs.read(BLOCK):
                    return True
        return False

    def known(self) -> KnownResults[R] | None:
        """The results the next stage can be fed (those holding no placeholder), read again from the
        file; None where the output cannot be read back (no later stage reads it)."""
        if self.output.read is None:
            return None
        unknown = {kept.item for kept in self.kept if kept.unknown}
        if not unknown:
            return KnownResults(self.output, self.path)
        known = self.path.with_name(f"known-{self.path.name}")
        self.output.write(known, (r for r in self._each() if self.output.item_of(r) not in unknown))
        return KnownResults(self.output, known)

    def _each(self) -> Iterable[R]:
        output = self.output
        if output.file is not None:
            return output.file(self.path)
        assert output.read is not None  # known() checked
        return output.read(self.path)


class KnownResults(Generic[R]):
    """A dry-run stage's known results in its file, read again when a later stage asks."""

    def __init__(self, output: Output[R], path: Path) -> None:
        self.output, self.path = output, path

    def whole(self) -> list[R]:
        read = self.output.read
        assert read is not None  # DryResults.known checked
        return read(self.path)

    def file(self) -> Iterable[R]:
        return self.output.file(self.path) if self.output.file is not None else self.whole()


def staged_work(work: Callable[[Any], Iterable[R]], results: DryResults[R]) -> Callable[[Any], list[Kept]]:
    """A step's stream as probe_stage runs it, its results written by `results` as they come."""
    return lambda session: results.write(work(session))
