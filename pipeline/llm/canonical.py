"""Canonical JSON: keys sorted, no insignificant whitespace, UTF-8 kept as is, no NaN.

The spelling is the json module's, `json.dumps(value, sort_keys=True, separators=(",", ":"),
ensure_ascii=False, allow_nan=False)`: every record's checksum and every recording line are these
bytes, so they may never change. orjson writes the same bytes about twenty times faster (a record
holding a 20 kB prompt: 3 µs against 75 µs), but only for values it writes alike, so orjson
writes a value only when every part of it is of a kind whose spelling is the same in both:

- str, int, bool and None, and dicts with str keys, lists and tuples of them, exactly those types
  (a subclass, an Enum, a datetime, a dataclass is left to json, which refuses or spells it its
  own way), at most 200 deep;
- a float only where orjson spells it as `repr` does (1e-05 is `0.00001` to orjson 3.13, NaN is
  `null`): checked float by float, so another orjson's spelling can send a value back to json but
  never change its bytes.

Whatever orjson then refuses (a lone surrogate, an int past 64 bits) is written by json, with the
same result or the same error as before. tests/test_canonical.py checks the bytes against json's
with Hypothesis, edge cases included, and every committed recording line's checksum.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_MAX_DEPTH = 200  # orjson's own limit is 254; json's is Python's recursion limit
_SORTED = orjson.OPT_SORT_KEYS


def json_canonical(value: Any) -> str:
    """The json module's canonical JSON: the reference every faster path must equal."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_bytes(value: Any) -> bytes:
    """`json_canonical(value).encode("utf-8")`, the same bytes or the same error."""
    if _alike(value, 0):
        try:
            return orjson.dumps(value, option=_SORTED)
        except orjson.JSONEncodeError:
            pass
    return json_canonical(value).encode("utf-8")


def canonical_json(value: Any) -> str:
    """`json_canonical(value)`, the same text or the same error (a lone surrogate is kept, as json
    keeps it: it is refused where the text is encoded)."""
    if _alike(value, 0):
        try:
            return orjson.dumps(value, option=_SORTED).decode("utf-8")
        except orjson.JSONEncodeError:
            pass
    return json_canonical(value)


def _float_alike(value: float) -> bool:
    return orjson.dumps(value) == repr(value).encode("ascii")


_LEAVES = (str, int, bool, type(None))


def _alike(value: Any, depth: int) -> bool:
    """Whether orjson writes `value` as json does, wherever it writes it at all."""
    kind = type(value)
    if kind in _LEAVES:
        return True
    if kind is float:
        return _float_alike(value)
    if depth >= _MAX_DEPTH:
        return False
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or (type(item) not in _LEAVES and not _alike(item, depth + 1)):
                return False
        return True
    if kind is list or kind is tuple:
        return all(type(item) in _LEAVES or _alike(item, depth + 1) for item in value)
    return False
