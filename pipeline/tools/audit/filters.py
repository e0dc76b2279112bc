"""Which recorded calls `judgeloop audit` shows, and, when none, why: the first filter that leaves
nothing, and the values that do exist for it among the calls the earlier filters kept.

    judgeloop audit --item 903 --iteration 5
    Error: no recorded call matches --iteration 5 (of the calls of --item 903).
    The iterations recorded there: 0, 1.

Each filter is one predicate and, where it selects on a value, the value a call has; the two are
written once, here, so that what is listed is exactly what would have matched.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from pipeline.llm.records import RecordedCall
from pipeline.tools.inventory import RunSummary


@dataclass(frozen=True)
class Selection:
    """Which calls to show; an empty field selects everything."""

    stages: tuple[str, ...] = ()
    items: tuple[str, ...] = ()
    iteration: int | None = None
    metric: str | None = None
    role: str | None = None
    model: str | None = None
    cache: Literal["hit", "miss"] | None = None
    search: str | None = None
    labels: tuple[tuple[str, str], ...] = ()  # any design's context labels, e.g. (("prompt", "full"),)
    keys: tuple[str, ...] = ()


def last_run_status(runs: dict[str, RunSummary], call: RecordedCall) -> str | None:
    run = runs.get(call.context.stage)
    return None if run is None else run.keys.get(call.record.key)


def _model(call: RecordedCall) -> str:
    return f"{call.record.model.name} {call.record.model.digest}"


def _contains(call: RecordedCall, lowered: str) -> bool:
    texts = [m.content for m in call.record.request.messages] + [call.record.reply.text]
    return any(lowered in text.lower() for text in texts)


@dataclass(frozen=True)
class Filter:
    """One option of `judgeloop audit`: whether it is given, whether a call passes it, and the
    value a call has for it (None: the filter is a search, with no values to list)."""

    option: str  # as the user wrote it, e.g. "--iteration 2"
    plural: str  # what its values are called: "iterations"
    keeps: Callable[[RecordedCall], bool]
    value: Callable[[RecordedCall], str | None] | None


def _label(option: str, plural: str, name: str, wanted: str) -> Filter:
    return Filter(option, plural, lambda c: c.context.label(name) == wanted, lambda c: c.context.label(name))


def filters(sel: Selection, runs: dict[str, RunSummary]) -> list[Filter]:
    """The filters `sel` gives, in the order a reader narrows down: where, then what, then text."""
    given: list[Filter] = []
    if sel.stages:
        given.append(
            Filter(
                " ".join(f"--stage {s}" for s in sel.stages),
                "stages",
                lambda c: c.context.stage in sel.stages,
                lambda c: c.context.stage,
            )
        )
    if sel.items:
        given.append(
            Filter(
                " ".join(f"--item {i}" for i in sel.items),
                "items",
                lambda c: c.context.item in sel.items,
                lambda c: c.context.item,
            )
        )
    if sel.keys:
        given.append(
            Filter(
                " ".join(f"--key {k}" for k in sel.keys),
                "keys",
                lambda c: c.record.key in sel.keys,
                lambda c: c.record.key,
            )
        )
    if sel.iteration is not None:
        iteration = sel.iteration
        given.append(
            Filter(
                f"--iteration {iteration}",
                "iterations",
                lambda c: c.context.step == iteration,
                lambda c: None if c.context.step is None else str(c.context.step),
            )
        )
    for name, wanted in (("metric", sel.metric), ("role", sel.role)):
        if wanted is not None:
            given.append(_label(f"--{name} {wanted}", f"{name}s", name, wanted))
    given += [_label(f"--label {n}={w}", f"values of label {n}", n, w) for n, w in sel.labels]
    if sel.model is not None:
        model = sel.model.lower()
        given.append(Filter(f"--model {sel.model}", "models", lambda c: model in _model(c).lower(), _model))
    if sel.cache is not None:
        cache = sel.cache
        given.append(
            Filter(
                f"--{cache}",
                "last-run outcomes (hit, miss)",
                lambda c: last_run_status(runs, c) == cache,
                lambda c: last_run_status(runs, c),
            )
        )
    if sel.search is not None:
        search = sel.search.lower()
        given.append(Filter(f"--search {sel.search!r}", "", lambda c: _contains(c, search), None))
    return given


def select(calls: Iterable[RecordedCall], sel: Selection, runs: dict[str, RunSummary]) -> list[RecordedCall]:
    given = filters(sel, runs)
    chosen = [c for c in calls if all(f.keeps(c) for f in given)]
    return sorted(chosen, key=lambda c: (*c.context.sort_key(), c.record.key))


def _natural(value: str) -> tuple[tuple[int, str], ...]:
    """2 before 10; numbers before words. Only ASCII digits are a number: str.isdigit() holds for `²`,
    which int() cannot read, and `\\d` for digits that only a newer Unicode (a newer Python) knows."""
    parts = (p for p in re.split(r"([0-9]+)", value) if p)
    return tuple((0, f"{int(p):012d}") if p.isascii() and p.isdigit() else (1, p) for p in parts)


def why_nothing(calls: Iterable[RecordedCall], sel: Selection, runs: dict[str, RunSummary]) -> str:
    """Why `select` found nothing: the first filter that leaves no call, and what exists for it."""
    remaining = list(calls)
    if not remaining:
        return "no recorded call at all. Fix: run the pipeline (make repro), or give --recordings FOLDER."
    kept_by: list[str] = []
    for given in filters(sel, runs):
        kept = [c for c in remaining if given.keeps(c)]
        if kept:
            remaining, kept_by = kept, [*kept_by, given.option]
            continue
        scope = f" (of the calls of {' '.join(kept_by)})" if kept_by else ""
        if given.value is None:
            return f"no recorded call matches {given.option}{scope}: no prompt or reply contains it."
        values = sorted({v for c in remaining if (v := given.value(c)) is not None}, key=_natural)
        listed = ", ".join(values[:40]) + (f", ... ({len(values)} in all)" if len(values) > 40 else "")
        there = " there" if kept_by else ""
        recorded = f"The {given.plural} recorded{there}: {listed or 'none'}."
        return f"no recorded call matches {given.option}{scope}. {recorded}"
    return "no recorded call matches."  # the filters each keep some, but --limit 0 keeps none
