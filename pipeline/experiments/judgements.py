"""A design's judgement unit: what `judgeloop diff` pairs between two runs.

Each design that judges says, through the registry (Design.judgements, "module:function" of
(params, RunFiles) -> Iterable[Judgement]), what one judgement is: its item, iteration and metric,
the score and verdict the pipeline used, the judge calls that produced it, and an id of the input
it judged. The tools pair two runs' judgements by (design, item, iteration, metric) and explain
each change from the calls; a new design gets `diff` by writing its hook, with no tools code.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from pipeline.errors import JudgeloopError
from pipeline.llm.records import RecordedCall
from pipeline.llm.types import CallContext

PairKey = tuple[str, str, int, str]  # design, item, iteration, metric


@dataclass(frozen=True)
class Judgement:
    """One judgement as a run used it.

    keys: the judge calls behind it, in the order asked (re-asks after the first); the first is the
    question as first put, the last the reply the score was read from. None of them: the design's
    results name no call (the pair is still compared on its score).
    upstream: an id of what was judged (a digest of the assessment's text, of the answer, ...), or
    None where the judge reads only fixed data: two runs whose upstream ids differ judged different
    inputs, so a change there is the input's, not the judge's.
    """

    design: str
    item: str
    iteration: int
    metric: str
    score: float | None
    passed: bool | None
    keys: tuple[str, ...] = ()
    upstream: str | None = None
    # judge.samples > 1: each sample's score; threshold: a score at or below it fails (None: no verdict).
    samples: tuple[float | None, ...] = field(default=(), compare=False)
    threshold: float | None = field(default=None, compare=False)

    @property
    def pair_key(self) -> PairKey:
        return (self.design, self.item, self.iteration, self.metric)


def text_id(text: str) -> str:
    """A short content id of an upstream text: equal texts, equal ids, on any machine."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class RunFiles:
    """One run's files, as a design's judgements hook reads them: its folder (a workspace, a
    revision checked out to a temporary folder, a colleague's copy) and its recorded calls by key."""

    root: Path
    calls: Mapping[str, RecordedCall]

    def path(self, relative: Path | str) -> Path:
        """A params path of the run, inside its folder (a path that leaves it is refused)."""
        candidate = Path(relative)
        resolved = (self.root / candidate).resolve()
        if candidate.is_absolute() or not resolved.is_relative_to(self.root.resolve()):
            raise JudgeloopError(
                f"the run's params name {relative}, outside its folder {self.root}. "
                "Fix: a path relative to the project."
            )
        return resolved

    def keys_where(self, stage: str, item: str, step: int | None = 0, **labels: str) -> tuple[str, ...]:
        """The keys of the calls recorded for one question (stage, item, step and labels), in the
        order of their attempts: for a design whose results do not name their calls."""
        found = [
            (int(context.label("sample") or 0), context.attempt, key)  # sample 0's first ask first
            for key, context in self._by_question.get((stage, item, step), [])
            if all(context.label(name) == value for name, value in labels.items())
        ]
        return tuple(key for *_, key in sorted(found))

    @cached_property
    def _by_question(self) -> dict[tuple[str, str, int | None], list[tuple[str, CallContext]]]:
        # A mapping that verifies each call as it is looked up may list the contexts unverified:
        # only the keys found here are then looked up, and verified.
        listed = getattr(self.calls, "contexts", None)
        pairs = listed() if listed is not None else ((k, c.context) for k, c in self.calls.items())
        index: dict[tuple[str, str, int | None], list[tuple[str, CallContext]]] = {}
        for key, context in pairs:
            index.setdefault((context.stage, context.item, context.step), []).append((key, context))
        return index


def of_metrics(judgements: Iterable[Judgement]) -> dict[tuple[str, str], list[Judgement]]:
    """(design, metric) -> its judgements, in the order given."""
    grouped: dict[tuple[str, str], list[Judgement]] = {}
    for judgement in judgements:
        grouped.setdefault((judgement.design, judgement.metric), []).append(judgement)
    return grouped
