"""The params that differ between two runs, as `judgeloop compare` lists them above its table.

Each run's params files as DVC reads them (YAML 1.2, plain Python values). A value is a leaf of the
file: a mapping is walked by its keys (`judge.samples`), a list by its indices (`judge.metrics[2]`),
so a changed element of a long list is named rather than both lists cut at 100 columns. A text key
that is not a plain word (a dot, a space, a colon or an arrow in it) is written between quotes
(`['a.b']`, so `a.b: 1` is not `a: {b: 1}`, and a key cannot spell `x: 1 → 2` in a line), and a key
that is no text between braces (`{0}`, `{true}`: `{0: x}` is not the list `[x]`). Two leaves
are the same only if they are of one type and equal: `1 → 1.0`, `true → 1` and `'1' → 1` are
changes of params.yaml (Python's `1 == 1.0 == True` would hide them), and NaN is NaN's equal (Python's
`nan != nan` would invent one). Each side is spelled as YAML writes it, a text between quotes, so the
two sides of a change never read alike. Every key and value is shown escaped on its one line
(pipeline.llm.terminal), then cut to the width.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pipeline.llm.terminal import closed_isolates, isolated, shown, spelled
from pipeline.tools.columns import fit
from pipeline.tools.compare_runs import Unreadable

WIDTH = 100


class _Absent:
    """A key the other run has and this one does not."""


ABSENT = _Absent()


_INDEX = re.compile(r"\[(\d+)\]")
_PLAIN_KEY = re.compile(r"[\w-]+")  # letters, digits, _ and - of any script


def _step(prefix: str, key: Any) -> str:
    """A mapping key's step of a path: `.key`; `['a.b']` for a text that is not a plain word (a
    dot, a space, a colon, a bracket, a quote, empty); `{0}` for a key that is no text (never a
    list's `[0]`): so that no two leaves share a path."""
    if not isinstance(key, str):
        return f"{prefix}{{{spelled_leaf(key)}}}"
    if _PLAIN_KEY.fullmatch(key):
        return f"{prefix}.{key}" if prefix else key
    return f"{prefix}[{spelled_leaf(key)}]"


def leaves(value: Any, prefix: str = "", *, lists: bool = True) -> dict[str, Any]:
    """Every leaf of a params file's data, by its path (`a.b[2].c`); an empty mapping or list is a
    leaf, but for the file's whole data (no leaf). `lists=False`: a list is one leaf, whole (what
    `judgeloop exp list` names, as `-S key=[...]` sets it)."""
    if isinstance(value, Mapping) and value:
        items = [(_step(prefix, key), item) for key, item in value.items()]
    elif isinstance(value, list | tuple) and value and lists:
        items = [(f"{prefix}[{n}]", item) for n, item in enumerate(value)]
    else:
        return {prefix: value} if prefix else {}
    found: dict[str, Any] = {}
    for path, item in items:
        found |= leaves(item, path, lists=lists)
    return found


def same(a: Any, b: Any) -> bool:
    """Whether two leaves are one value: of one type and equal, NaN equal to NaN; two lists or
    mappings, whether their leaves are."""
    if isinstance(a, list | tuple | Mapping) and a and isinstance(b, list | tuple | Mapping) and b:
        old, new = leaves(a, "v"), leaves(b, "v")
        return old.keys() == new.keys() and all(same(old[key], new[key]) for key in old)
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


def spelled_leaf(value: Any) -> str:
    """A leaf as params.yaml spells it: true, null, 1.0, a text between quotes."""
    if value is ABSENT:
        return "(absent)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return spelled([value])[1:-1]  # between quotes, a quote inside it escaped (terminal.spelled)
    if isinstance(value, Mapping):
        return "{}"
    return spelled(value)  # a number (1.0, nan, inf), or an empty list


def _in_order(path: str) -> str:
    """A path's sort key: by name, a list's elements by their index (2 before 10)."""
    return _INDEX.sub(lambda match: f"[{int(match[1]):030d}]", path)


def _file_changes(file: str, old_data: Any, new_data: Any) -> list[str]:
    """`key: old → new` for every value of one params file that differs, shown: the key and each
    side isolated (pipeline.llm.terminal.isolated), so that a right-to-left key or text does not
    draw the sides into its own run and show them swapped."""
    old, new = leaves(old_data), leaves(new_data)
    prefix = "" if file == "params.yaml" else f"{_shown(file)}: "
    lines = []
    for key in sorted(old.keys() | new.keys(), key=_in_order):
        a, b = old.get(key, ABSENT), new.get(key, ABSENT)
        if not same(a, b):
            sides = " → ".join(isolated(_shown(spelled_leaf(side))) for side in (a, b))
            lines.append(f"{prefix}{isolated(_shown(key))}: {sides}")
    return lines


def _shown(text: str) -> str:
    return shown(text, one_line=True)


def params_changes(runs: Sequence[Mapping[str, Any]], names: Sequence[str] = ("A", "B")) -> list[str]:
    """`key: old → new` for every params value that differs between the two runs (a file other
    than params.yaml named before its keys); a file one run lacks, or that DVC could not read in a
    run (Unreadable: not its keys as `(absent)`), is one line."""
    old_run, new_run = runs
    lines = []
    for file in sorted(old_run.keys() | new_run.keys()):
        if file not in old_run or file not in new_run:
            lacking = names[0] if file not in old_run else names[1]
            lines.append(_shown(f"{file}: not in {lacking}"))
            continue
        files = [(name, run[file]) for name, run in zip(names, runs, strict=True)]
        said = [
            _shown(f"{file} in {name}: {data.why}") for name, data in files if isinstance(data, Unreadable)
        ]
        lines += said or _file_changes(file, old_run[file], new_run[file])
    return ["  " + closed_isolates(fit(line, WIDTH - 2)) for line in lines]
