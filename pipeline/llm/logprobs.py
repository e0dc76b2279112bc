"""Token log-probabilities: read from each backend's reply, and turned into a score distribution.

Every backend that gives them speaks the OpenAI shape for one generated token,
`{"token", "logprob", "top_logprobs": [{"token", "logprob"}, ...]}` (Ollama >= 0.12.11 as
`logprobs` on the reply, the OpenAI API and llama-cpp-python as `choices[0].logprobs.content`),
so one reader serves them all.

A masked token (a grammar forbids it) has logprob -inf, which JSON cannot carry; it is written
FLOOR, whose probability is 0.0 in floating point all the same.

`token_at` and `integer_field_span` find the token that wrote a value; what the probabilities there
say about a judge's score (G-Eval's weighting) is pipeline.judges.geval's.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from pipeline.llm.types import Logprobs, TokenLogprob

FLOOR = -9999.0  # exp(FLOOR) == 0.0 in float64


def _finite(value: Any) -> float:
    """A logprob the server sent: a JSON number (ValueError for any other value, a reply of another
    shape: float() read text and failed on a list with a TypeError's traceback)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"a logprob that is not a number ({str(value)[:40]!r})")
    number = float(value)
    return number if math.isfinite(number) else FLOOR


def _token(value: Any) -> str:
    if not isinstance(value, str):  # str() made any value a token's text: a wrong value, trusted
        raise ValueError(f"a token that is not text ({str(value)[:40]!r})")
    return value


def read_wire_logprobs(entries: Any) -> Logprobs | None:
    """The OpenAI-shaped list of per-token entries, or None when the server sent none; ValueError
    for a token, a logprob or a list of alternatives of another shape (a protocol error)."""
    if not isinstance(entries, list):
        return None
    rows = []
    for entry in entries:
        if not isinstance(entry, dict) or "token" not in entry or entry.get("logprob") is None:
            continue
        alternatives = entry.get("top_logprobs") or []
        if not isinstance(alternatives, list):
            raise ValueError(f"top_logprobs that are not a list ({str(alternatives)[:40]!r})")
        top = [
            (_token(alt["token"]), _finite(alt["logprob"]))
            for alt in alternatives
            if isinstance(alt, dict) and "token" in alt and alt.get("logprob") is not None
        ]
        rows.append((_token(entry["token"]), _finite(entry["logprob"]), top))
    return Logprobs(rows)  # which makes each token a str


def token_at(logprobs: Sequence[TokenLogprob], position: int) -> int | None:
    """Index of the generated token whose text covers character `position` of the reply (the
    tokens' texts, back to back, spell the reply)."""
    end = 0
    for index, token in enumerate(logprobs):
        end += len(token.token)
        if position < end:
            return index
    return None


_INTEGER_FIELD = r'"{name}"\s*:\s*(-?\d+)'


def integer_field_span(text: str, field: str) -> tuple[int, int] | None:
    """Where the value of JSON integer field `field` is written in `text` (the first occurrence):
    the character span of its digits."""
    match = re.search(_INTEGER_FIELD.format(name=re.escape(field)), text)
    return None if match is None else match.span(1)
