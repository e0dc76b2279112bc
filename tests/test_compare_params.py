"""`judgeloop compare`'s "params that differ" (compare-review): a difference of type is one (1 → 1.0,
true → 1, '1' → 1), spelled so that its two sides read apart; NaN is no difference from NaN; a list's
element that changed is named by its index; a value's line breaks and escapes stay in its line; a
run without the params file is one line, not every key."""

from __future__ import annotations

import copy
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from wcwidth import wcswidth

from pipeline.llm.terminal import guarded
from pipeline.tools.compare import params_changes


def _changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    return [
        guarded(line, isolates=True) for line in params_changes([{"params.yaml": old}, {"params.yaml": new}])
    ]


def test_a_change_of_type_is_a_change_spelled_apart() -> None:
    lines = _changes({"a": 1, "b": "1", "c": True, "d": "yes"}, {"a": 1.0, "b": 1, "c": 1, "d": True})
    assert "  a: 1 → 1.0" in lines
    assert "  b: '1' → 1" in lines
    assert "  c: true → 1" in lines
    assert "  d: 'yes' → true" in lines
    assert len(lines) == 4


def test_nan_is_the_same_as_nan() -> None:
    assert _changes({"x": math.nan, "y": [math.nan]}, {"x": math.nan, "y": [math.nan]}) == []


def test_a_list_element_is_named_by_its_index() -> None:
    old = {"judge": {"metrics": ["accuracy", "coherence", {"name": "x", "weight": 1}]}}
    new = {"judge": {"metrics": ["accuracy", "coherence", {"name": "x", "weight": 2}, "new"]}}
    assert _changes(old, new) == ["  judge.metrics[2].weight: 1 → 2", "  judge.metrics[3]: (absent) → 'new'"]


def test_a_long_list_change_is_not_cut_away() -> None:
    old = {"rag": {"dimensions": [f"dimension number {n}" for n in range(20)]}}
    new = {"rag": {"dimensions": [*old["rag"]["dimensions"][:19], "changed"]}}
    assert _changes(old, new) == ["  rag.dimensions[19]: 'dimension number 19' → 'changed'"]


def test_a_value_with_line_breaks_and_escapes_stays_in_one_line() -> None:
    lines = _changes(
        {"llm": {"model": "a"}}, {"llm": {"model": "b\n  llm.seed: 1 → 2\x1b[2J\u202e" + "z" * 99}}
    )
    assert len(lines) == 1 and "\n" not in lines[0] and len(lines[0]) <= 100
    assert lines[0].startswith("  llm.model: 'a' → 'b\\n  llm.seed: 1 → 2\\x1b[2J\\u202e")


def test_a_run_without_the_params_file_is_one_line() -> None:
    lines = [guarded(line) for line in params_changes([{"params.yaml": {"a": 1, "b": 2}}, {}], ["HEAD", "B"])]
    assert lines == ["  params.yaml: not in B"]


scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=30))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(st.text(max_size=12), values, max_size=5),
    st.dictionaries(st.text(max_size=12), values, max_size=5),
)
def test_any_params(old: dict[str, Any], new: dict[str, Any]) -> None:
    """A run against a copy of itself differs in nothing (NaN included); against another, every line
    is one line of 100 columns at most, and none but where a leaf differs."""
    assert _changes(old, copy.deepcopy(old)) == []
    lines = _changes(old, new)
    assert all("\n" not in line and 0 <= wcswidth(line) <= 100 for line in lines)  # columns (review23)
    assert (lines == []) == (_canonical(old) == _canonical(new))


def _canonical(value: Any) -> Any:
    """The value with its types in it, NaN equal to NaN, a mapping's order not (the oracle)."""
    if isinstance(value, dict):
        return ("map", sorted((key, _canonical(item)) for key, item in value.items()))
    if isinstance(value, list):
        return ("list", [_canonical(item) for item in value])
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    return (type(value).__name__, value)


def test_exp_list_finds_the_same_changes() -> None:
    """`judgeloop exp list` names an experiment's changed params by compare's rule (it compared by ==)."""
    from pipeline.tools.exp_list import changed_params

    old = {"params.yaml": {"a": 1, "b": True, "n": math.nan, "m": ["x", "y"]}}
    new = {"params.yaml": {"a": 1.0, "b": 1, "n": math.nan, "m": ["x", "z"]}}
    assert changed_params(old, new) == ["a=1.0", "b=1", "m=['x', 'z']"]  # a list whole (review23)


def test_sorted_by_name_and_index() -> None:
    old = {"b": 1, "a": {"z": 1}, "m": list(range(12))}
    new = {"b": 2, "a": {"z": 2, "c": 1}, "m": [*range(2), -2, *range(3, 10), -10, -11]}
    keys = [line.split(":")[0].strip() for line in _changes(old, new)]
    assert keys == ["a.c", "a.z", "b", "m[2]", "m[10]", "m[11]"]
