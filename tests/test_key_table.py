"""A session's keys packed (pipeline.llm.key_table, issue 33): read as the dict they replace, written
into the run summary in the same bytes, and a few dozen bytes a key instead of about 130 (its text
and a dict's slot). Bounds on traced bytes (tracemalloc), never on time."""

from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.llm import key_table, run_summary
from pipeline.llm.key_table import KeyTable
from pipeline.llm.keys import KEY_PREFIX

KEYS = 20_000
PER_KEY_BYTES = 80  # 16-byte slots at most two thirds full, two 8-byte halves and a byte: 49 to 73
FIXED_BYTES = 64 << 10

_high = st.sampled_from([0, 1, 2**63, 2**64 - 1])  # few high halves: keys that share one
_packed = st.builds(lambda h, lo: f"{KEY_PREFIX}{h:016x}{lo:016x}", _high, st.integers(0, 2**64 - 1))
_other = st.one_of(
    st.text(max_size=40),
    st.builds(lambda h: f"jl1:{h:032x}", st.integers(0, 2**128 - 1)),  # another recipe's prefix
    st.builds(lambda h: f"{KEY_PREFIX}{h:032X}", st.integers(0, 2**128 - 1)),  # upper case: not packed
)


@settings(deadline=None)
@given(
    st.lists(st.tuples(st.one_of(_packed, _other), st.sampled_from(["hit", "miss", "asked"])), max_size=80)
)
def test_a_key_table_reads_as_a_dict_that_keeps_the_first_word(pairs: list[tuple[str, str]]) -> None:
    table, model = KeyTable(), dict[str, str]()
    for key, word in pairs:
        assert table.setdefault(key, word) == model.setdefault(key, word)
    assert len(table) == len(model) and list(table) == sorted(model)
    assert list(table.sorted_items()) == sorted(model.items())
    for key in [*model, f"{KEY_PREFIX}{0:032x}", "absent"]:
        assert (key in table) == (key in model)
        assert table.get(key) == model.get(key)
    summary = {"stage": "judge", "mode": "auto", "hits": 1, "keys": None}
    assert "".join(run_summary.summary_chunks(summary, table)) == "".join(
        run_summary.summary_chunks(summary, model)
    )


def test_many_keys_sorted_the_same_by_numpy_and_by_python(monkeypatch: pytest.MonkeyPatch) -> None:
    import random

    rng = random.Random(5)
    table = KeyTable()
    for _ in range(3000):
        table.setdefault(f"{KEY_PREFIX}{rng.getrandbits(128):032x}", rng.choice(["hit", "miss"]))
    by_python = list(table.sorted_items())
    monkeypatch.setattr(key_table, "SORT_IN_NUMPY_AT", 0)
    assert list(table.sorted_items()) == by_python == sorted(by_python)


def test_a_key_held_costs_a_few_dozen_bytes() -> None:
    import random

    rng = random.Random(7)
    table = KeyTable()
    table.setdefault(f"{KEY_PREFIX}{rng.getrandbits(128):032x}", "hit")
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for n in range(KEYS):
            table.setdefault(f"{KEY_PREFIX}{rng.getrandbits(128):032x}", "hit" if n % 3 else "miss")
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert len(table) == KEYS + 1
    assert held < PER_KEY_BYTES * KEYS + FIXED_BYTES, f"{held / KEYS:.0f} bytes a key"
