"""A recording's key table packed in arrays (pipeline.llm.recordings.key_places, issue 33): it reads
as the dict it replaces, for keys present and absent, in the recording's order."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.llm.keys import KEY_PREFIX
from pipeline.llm.recordings.key_places import BlockPlaces, KeyPlaces, _block_id, places

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


near_misses = st.sampled_from(
    [
        "0x" + "0" * 13 + "1",  # int(_, 16) reads each of these as a 64-bit number
        "0X" + "0" * 13 + "1",
        " " + "0" * 14 + "1",
        "0" * 15 + "1\n",
        "+" + "0" * 14 + "1",
        "0000_00000000001",
        "000000000000000A",
        "\u0660" * 15 + "1",
        "0" * 15,
        "0" * 17,
    ]
)
near_ids = near_misses | st.text(
    alphabet=st.sampled_from("0123456789abcdefABCDEFxX _+-\n\u0660\uff10"), min_size=14, max_size=18
)


@settings(deadline=None)
@given(near_ids | st.text(max_size=20) | ids)
def test_an_id_of_the_writers_form_is_told_as_the_pattern_tells_it(blob: str) -> None:
    """16 lowercase hex digits and nothing else: not int()'s looser reading (a sign, "0x", "_",
    spaces, capitals, other scripts' digits), which would place "0x00000000000001" as id 1."""
    assert _block_id(blob) == bool(re.fullmatch(r"[0-9a-f]{16}", blob))
    table = BlockPlaces()
    table[blob] = 7
    assert table.get(blob) == 7 and list(table) == [blob]


def _edges(bits: int) -> list[int]:
    """Ids at and beside each bucket's edges, for a table sealed into 2**bits buckets."""
    shift = 64 - bits
    tops = sorted({0, 1, (1 << bits) // 2, (1 << bits) - 1})
    return sorted(
        {e & (2**64 - 1) for top in tops for e in (top << shift, (top << shift) - 1, (top + 1 << shift) - 1)}
    )


@pytest.mark.parametrize("size", [1, 2, 3, 4, 7, 8, 9, 255, 256, 257, 5000])
def test_tables_of_any_size_read_as_the_dict_at_every_bucket_edge(size: int) -> None:
    """A bucket for every one or two ids: ids on either side of each bucket's edges, and ids absent
    beside each present one, at sizes around the powers of two where the buckets double."""
    rng = random.Random(size)
    bits = max(0, size.bit_length() - 1)
    edges = _edges(bits)
    numbers = (edges + [rng.getrandbits(64) for _ in range(size)])[:size]
    rng.shuffle(numbers)
    expected = {f"{number:016x}": line for line, number in enumerate(numbers)}
    table = BlockPlaces()
    for blob, line in expected.items():
        table[blob] = line
    assert len(table) == len(expected)
    for number in {
        *numbers,
        *edges,
        *(n + 1 for n in numbers if n < 2**64 - 1),
        *(n - 1 for n in numbers if n),
    }:
        blob = f"{number:016x}"
        assert table.get(blob) == expected.get(blob)
    assert list(table) == list(expected)


def test_ids_crowded_into_one_bucket_are_all_found() -> None:
    """Block ids are hashes, spread evenly, but a recording is untrusted input: ids that share their
    top bits lie in one bucket, searched whole (slower, never wrong)."""
    numbers = [0xABC << 52 | low for low in range(0, 3000, 3)]
    expected = {f"{number:016x}": line for line, number in enumerate(numbers)}
    table = BlockPlaces()
    for blob, line in reversed(expected.items()):
        table[blob] = line
    for number in range(numbers[0] - 2, numbers[-1] + 3):
        blob = f"{number:016x}"
        assert table.get(blob) == expected.get(blob)


near_keys = st.builds(
    lambda digits: f"{KEY_PREFIX}{digits}", near_ids | near_ids.map(lambda d: d * 2)
) | st.sampled_from(
    [
        f"{KEY_PREFIX}{digits}"  # int(_, 16) reads each of these as a 128-bit number
        for digits in (
            "0x" + "0" * 29 + "1",
            " " + "0" * 30 + "1",
            "0" * 31 + "1\n",
            "+" + "0" * 30 + "1",
            "0000_" + "0" * 26 + "1",
            "0" * 31 + "A",
            "\u0660" * 31 + "1",
        )
    ]
    + [f"jl1:{'0' * 32}", f"{KEY_PREFIX.upper()}{'0' * 32}", f"{'0' * 32}{KEY_PREFIX}"]
)


@settings(deadline=None)
@given(near_keys | keys | st.text(max_size=40))
def test_a_key_of_todays_recipe_is_told_as_the_pattern_tells_it(key: str) -> None:
    packs = bool(re.fullmatch(rf"{re.escape(KEY_PREFIX)}[0-9a-f]{{32}}", key))
    table = places({key: 3})
    assert isinstance(table, KeyPlaces) == packs
    assert table.get(key) == 3 and key in table and list(table) == [key]


@pytest.mark.parametrize("size", [1, 2, 3, 4, 7, 8, 9, 255, 256, 257, 3000])
def test_key_tables_of_any_size_read_as_the_dict_at_every_bucket_edge(size: int) -> None:
    rng = random.Random(size)
    edges = _edges(max(0, size.bit_length() - 1))
    highs = (edges + [rng.getrandbits(64) for _ in range(size)])[:size]
    numbers = [high << 64 | rng.choice([0, rng.getrandbits(64)]) for high in highs]
    numbers += [n ^ 1 for n in numbers[: size // 3]]  # keys sharing a high half
    rng.shuffle(numbers)
    first_lines = {f"{KEY_PREFIX}{number:032x}": line for line, number in enumerate(numbers)}
    table = places(first_lines)
    assert isinstance(table, KeyPlaces) and len(table) == len(first_lines)
    around = {n + step for n in numbers for step in (-1, 1, 1 << 64, -(1 << 64))}
    for number in {*numbers, *(n for n in around if 0 <= n < 2**128), *(e << 64 for e in edges)}:
        key = f"{KEY_PREFIX}{number:032x}"
        assert table.get(key, -1) == first_lines.get(key, -1) and (key in table) == (key in first_lines)
    assert list(table) == list(first_lines)
