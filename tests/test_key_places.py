"""A recording's key table packed in arrays (pipeline.llm.recordings.key_places, issue 33): it reads
as the dict it replaces, for keys present and absent, in the recording's order."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.llm.keys import KEY_PREFIX
from pipeline.llm.recordings.key_places import BlockPlaces, KeyPlaces, places

halves = st.sampled_from([0, 1, 2**63, 2**64 - 1]) | st.integers(0, 2**64 - 1)
keys = st.builds(lambda high, low: f"{KEY_PREFIX}{high << 64 | low:032x}", halves, halves)


@settings(deadline=None)  # a loaded machine makes an example slow, not wrong
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
    assert "jl1:abc" not in table and table.get(f"{KEY_PREFIX}{'A' * 32}") is None
    assert 5 not in table  # type: ignore[comparison-overlap]  # (any object may be asked for)


ids = st.sampled_from(["0" * 16, "f" * 16, "00000000000000ff"]) | st.from_regex(
    r"[0-9a-f]{16}", fullmatch=True
)
odd_ids = st.sampled_from(["F" * 16, "abc", "0" * 17, ""])


@settings(deadline=None)  # a loaded machine makes an example slow, not wrong
@given(
    st.lists(st.tuples(ids | odd_ids, st.integers(0, 2**32 - 1)), max_size=60),
    st.lists(ids | odd_ids, max_size=10),
)
def test_block_places_read_as_the_dict(placed: list[tuple[str, int]], asked: list[str]) -> None:
    """Placed in any order, an id placed twice included (its last place stands); asked before and
    after more are placed."""
    table, expected = BlockPlaces(), {}
    for at, (blob, line) in enumerate(placed):
        table[blob] = expected[blob] = line
        if at % 7 == 0:  # read while it is filled: sealed, then unsealed by the next placing
            assert table.get(blob) == line
    for blob in [*expected, *asked]:
        assert table.get(blob) == expected.get(blob) and (blob in table) == (blob in expected)
    assert len(table) == len(expected)
    packed = [blob for blob in expected if re.fullmatch(r"[0-9a-f]{16}", blob)]
    assert list(table) == packed + [blob for blob in expected if blob not in packed]  # first placed first
