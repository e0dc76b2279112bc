"""Token log-probabilities: read from each backend's reply, and turned into a score distribution.

Every backend that gives them speaks the OpenAI shape for one generated token,
`{"token", "logprob", "top_logprobs": [{"token", "logprob"}, ...]}` (Ollama >= 0.12.11 as
`logprobs` on the reply, the OpenAI API and llama-cpp-python as `choices[0].logprobs.content`),
so one reader serves them all.

A masked token (a grammar forbids it) has logprob -inf, which JSON cannot carry; it is written
FLOOR, whose probability is 0.0 in floating point all the same.

`score_distribution` is G-Eval's weighting (Liu et al. 2023): at the token that writes a score,
the probability the model gave each allowed score, renormalised over those scores, and their
expected value.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.llm.types import Logprobs, TokenLogprob

FLOOR = -9999.0  # exp(FLOOR) == 0.0 in float64


def _finite(value: Any) -> float:
    number = float(value)
    return number if math.isfinite(number) else FLOOR


def read_wire_logprobs(entries: Any) -> Logprobs | None:
    """The OpenAI-shaped list of per-token entries, or None when the server sent none."""
    if not isinstance(entries, list):
        return None
    rows = []
    for entry in entries:
        if not isinstance(entry, dict) or "token" not in entry or entry.get("logprob") is None:
            continue
        top = [
            (alt["token"], _finite(alt["logprob"]))
            for alt in entry.get("top_logprobs") or ()
            if isinstance(alt, dict) and "token" in alt and alt.get("logprob") is not None
        ]
        rows.append((entry["token"], _finite(entry["logprob"]), top))
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


@dataclass(frozen=True)
class ScoreDistribution:
    probabilities: dict[int, float]  # allowed value -> probability, renormalised to sum to 1
    expected: float  # sum of value * probability: G-Eval's weighted score
    mass: float  # the probability the model put on allowed values before renormalising
    argmax: int  # the most probable allowed value


def score_distribution(
    logprobs: Sequence[TokenLogprob], position: int, allowed: Iterable[int]
) -> ScoreDistribution | None:
    """The distribution over `allowed` integer values at the token covering character `position`
    (see integer_field_span), read from that token's top alternatives and the chosen token itself.
    None when no token covers the position or no alternative there is an allowed value.

    Only single-token values count: a value such as 10 that a tokenizer writes as two tokens
    cannot be told apart from 1 at the first one.
    """
    index = token_at(logprobs, position)
    if index is None:
        return None
    token = logprobs[index]
    wanted = {str(value): value for value in allowed}
    # The chosen token is usually among its own alternatives: each distinct token text counts once;
    # two texts for one value ("4" and " 4") add up.
    candidates = {alt.token: alt.logprob for alt in token.top}
    candidates.setdefault(token.token, token.logprob)
    seen: dict[int, float] = {}
    for text, logprob in candidates.items():
        value = wanted.get(text.strip())
        if value is not None:
            seen[value] = seen.get(value, 0.0) + math.exp(logprob)
    mass = sum(seen.values())
    if not seen or mass <= 0.0:
        return None
    probabilities = {value: seen.get(value, 0.0) / mass for value in sorted(wanted.values())}
    expected = sum(value * p for value, p in probabilities.items())
    argmax = max(probabilities, key=lambda value: (probabilities[value], -value))
    return ScoreDistribution(probabilities=probabilities, expected=expected, mass=mass, argmax=argmax)
