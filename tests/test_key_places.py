"""A recording's key table packed in arrays (pipeline.llm.recordings.key_places, issue 33): it reads
as the dict it replaces, for keys present and absent, in the recording's order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pipeline.llm.keys import KEY_PREFIX
from pipeline.llm.recordings.key_places import KeyPlaces, places

halves = st.sampled_from([0, 1, 2**63, 2**64 - 1]) | st.integers(0, 2**64 - 1)
keys = st.builds(lambda high, low: f"{KEY_PREFIX}{high << 64 | low:032x}", halves, halves)


@given(st.lists(keys, unique=True, max_size=60), st.lists(keys, max_size=20))
def test_reads_as_the_dict(recorded: list[str], asked: list[str]) -> None:
    first_lines = {key: line * 3 for line, key in enumerate(recorded)}
    table = places(first_lines)
    assert isinstance(table, KeyPlaces)
    assert list(table) == list(first_lines) and len(table) == len(first_lines)
    for key in [*recorded, *asked]:
        assert (key in table) == (key in first_lines)
        assert table.get(key) == first_lines.get(key)
    assert set(table.keys()) == set(first_lines)


def test_keys_sharing_a_half() -> None:
    """Keys whose high halves are equal lie side by side in the search: each found by its low half."""
    recorded = [f"{KEY_PREFIX}{7 << 64 | low:032x}" for low in (5, 1, 9, 3)]
    table = places({key: line for line, key in enumerate(recorded)})
    assert [table[key] for key in recorded] == [0, 1, 2, 3]
    assert f"{KEY_PREFIX}{7 << 64 | 4:032x}" not in table
    assert f"{KEY_PREFIX}{6 << 64 | 5:032x}" not in table


def test_other_keys_kept_as_a_dict() -> None:
    """A key not of today's recipe (or not as request_key writes one) is not packed: the dict stays."""
    for odd in ("jl1:abc", f"{KEY_PREFIX}{'A' * 32}", f"{KEY_PREFIX}{'0' * 31}", f"{KEY_PREFIX}{'0' * 33}"):
        first_lines = {f"{KEY_PREFIX}{'0' * 32}": 0, odd: 1}
        assert places(first_lines) is first_lines
    table = places({f"{KEY_PREFIX}{'0' * 32}": 0})
    assert "jl1:abc" not in table and table.get(f"{KEY_PREFIX}{'A' * 32}") is None and 5 not in table
