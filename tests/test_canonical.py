"""pipeline.llm.canonical: orjson where it writes a value as the json module does, json otherwise;
the same bytes (or the same error) as `json.dumps(sort_keys, separators, ensure_ascii=False,
allow_nan=False)` for every value, and every committed recording's checksums unchanged."""

from __future__ import annotations

import enum
import json
import math
import sys
import uuid
from collections import OrderedDict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.llm.canonical import canonical_bytes, canonical_json, json_canonical
from pipeline.llm.recordings.stage_folders import stage_dirs
from pipeline.llm.recordings.stage_reader import read_stage, split_recording
from pipeline.llm.records import CallRecord

ROOT = Path(__file__).resolve().parents[1]


def outcome(write: Any, value: Any) -> tuple[str, Any]:
    try:
        return "ok", write(value)
    except Exception as exc:  # the error itself is what is compared
        return "error", (type(exc), str(exc))


def reference_bytes(value: Any) -> bytes:
    return json_canonical(value).encode("utf-8")


def assert_same(value: Any) -> None:
    assert outcome(canonical_bytes, value) == outcome(reference_bytes, value)
    assert outcome(canonical_json, value) == outcome(json_canonical, value)


# Every character, lone surrogates included, and text made of the awkward ones.
ANY_CHAR = st.characters(codec=None, exclude_categories=())
AWKWARD = st.sampled_from(
    ["\x00", "\x1f", "\x7f", "\x85", '"', "\\", "/", "\b", "\f", "\n", "\r", "\t", "\u2028", "\u2029",
     "\ud800", "\udfff", "\ud83d", "\ude00", "\ufeff", "\uffff", "\U00010000", "\U0001f600", "\U0010ffff",
     "é", "–", "’"]
)  # fmt: skip
TEXT = st.one_of(st.text(ANY_CHAR, max_size=12), st.text(AWKWARD, max_size=6), st.text(max_size=40))
BIG_INTS = st.sampled_from([2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**40, -(10**40)])
INTS = st.one_of(st.integers(), BIG_INTS, st.integers(min_value=-(2**70), max_value=2**70))
FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True),
    st.sampled_from([1e-5, 1e-7, 1e-4, 9.99e-5, 1e15, 1e16, 1e17, 1.5e300, 5e-324, -0.0, 0.0, 0.1, 1.0]),
    st.builds(lambda m, e: m * 10.0**e, st.integers(-(10**6), 10**6), st.integers(-30, 30)),
)
LEAVES = st.one_of(st.none(), st.booleans(), INTS, FLOATS, TEXT)
KEYS = st.one_of(TEXT, TEXT, TEXT, st.integers(), st.floats(), st.booleans(), st.none())


def containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=5),
        st.lists(children, max_size=5).map(tuple),
        st.dictionaries(TEXT, children, max_size=5),
        st.dictionaries(KEYS, children, max_size=4),
    )


JSON_VALUES = st.recursive(LEAVES, containers, max_leaves=30)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSON_VALUES)
def test_the_same_bytes_or_the_same_error_as_json(value: Any) -> None:
    assert_same(value)


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(st.text(ANY_CHAR, max_size=4), st.integers(), max_size=12))
def test_keys_sort_as_python_sorts_them(value: dict[str, int]) -> None:
    # Characters past U+FFFF against U+E000-U+FFFF are where UTF-16 order and code point order part.
    assert_same(value)


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Name(enum.StrEnum):
    ANN = "ann"


class Text(str):
    pass


class Number(int):
    pass


class Real(float):
    def __repr__(self) -> str:
        return "real"


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def circular() -> Any:
    value: list[Any] = []
    value.append(value)
    return value


@pytest.mark.parametrize(
    "value",
    [
        math.nan, math.inf, -math.inf, {"a": math.nan}, [1.0, math.inf],
        1e-5, 1e-7, 1e-4, 1e16, 1e15, 1e22, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, -0.0,
        2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**4400,
        "\ud800", {"a": "x\udfffy"}, {"\ud800": 1}, "\ud83d\ude00", "\U0001f600",
        "\x00\x1f\x7f\u2028\u2029\x85",
        {"\uffff": 1, "\U00010000": 2, "\ue000": 3, "a": 4, "": 5},
        {1: "a"}, {1: "a", "b": 2}, {True: 1, None: 2}, {1.5: 1}, {"b": {2: 3}, "a": 1},
        (1, "a", None), OrderedDict([("b", 1), ("a", 2)]),
        Colour.RED, Level.HIGH, Name.ANN, Text("x"), {"a": Text("é")}, Number(5), Real(1.5),
        {Text("k"): 1}, uuid.UUID(int=1), datetime(2026, 1, 1, tzinfo=UTC), b"bytes", {1, 2},
        nested(150), nested(199), nested(200), nested(254), nested(300), circular(),
    ],
    ids=lambda value: type(value).__name__,
)  # fmt: skip
def test_edge_cases(value: Any) -> None:
    assert_same(value)


def test_orjson_writes_the_common_record_and_json_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path is taken where it can be (so the tests above compare orjson with json, not
    json with itself), and not where orjson spells a value its own way."""
    written: list[Any] = []
    real = orjson.dumps

    def spy(value: Any, *args: Any, **kwargs: Any) -> bytes:
        written.append(value)
        return real(value, *args, **kwargs)

    monkeypatch.setattr(orjson, "dumps", spy)
    common = {"key": "jl2:0", "request": {"messages": [{"role": "user", "content": "é\n" * 9}]}, "t": 0.9}
    assert canonical_bytes(common) == reference_bytes(common)
    assert common in written
    written.clear()
    assert canonical_bytes({"p": 1e-5}) == b'{"p":1e-05}'
    assert {"p": 1e-5} not in written
    with pytest.raises(ValueError, match="Out of range float values"):
        canonical_bytes({"p": math.nan})


def test_every_committed_recording_line_checksums_as_written() -> None:
    """Each committed call's record: its checksum recomputed (through canonical_bytes) equals the
    one written, its body's bytes equal json's, and each line is its own canonical JSON."""
    directories = stage_dirs(ROOT / "recordings")
    assert directories, "no committed recordings found"
    calls = 0
    for directory in directories:
        for loaded in read_stage(directory, verify=False):
            record = loaded.call.record
            body = record.model_dump(mode="json", exclude={"checksum"})
            assert canonical_bytes(body) == reference_bytes(body), f"{loaded.path}:{loaded.line}"
            assert record.expected_checksum() == record.checksum, f"{loaded.path}:{loaded.line}"
            assert CallRecord.model_validate(record.model_dump()).problem() is None
            calls += 1
        for number, line in split_recording(directory).calls:
            parsed = json.loads(line)
            assert canonical_json(parsed) == json_canonical(parsed), f"{directory}:{number}"
    assert calls > 100


def test_python_recursion_limit_is_left_to_json() -> None:
    # json raises RecursionError past Python's limit; so must this (orjson is not asked).
    deep = nested(sys.getrecursionlimit() + 50)
    assert outcome(canonical_bytes, deep)[0] == outcome(reference_bytes, deep)[0] == "error"
