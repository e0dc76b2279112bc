"""G-Eval's probability-weighted score (Liu et al. 2023): at the token where a judge writes its score,
the probability it gave each allowed score, renormalised over those scores, and their expected value.

The one place it is computed: every judge that asks for log-probabilities (the rubric judge in json
mode, the structured judge, the SummEval judge) reads its score's distribution with
`field_distribution`, and `expected_score` is the weighting itself. The token-level reading (which
token wrote a value, and its alternatives) is pipeline.llm.logprobs'.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from pipeline.judges.likert import LIKERT_VALUES
from pipeline.llm.logprobs import integer_field_span, token_at
from pipeline.llm.types import TokenLogprob
from pipeline.numbers import fsum, stated

Value = TypeVar("Value", int, float)  # a score value: a whole score, or one on a finer scale


@dataclass(frozen=True)
class ScoreDistribution:
    probabilities: dict[int, float]  # allowed value -> probability, renormalised, at the stated precision
    expected: float  # sum of value * probability: G-Eval's weighted score, at the stated precision
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
    mass = fsum(seen.values())
    if not seen or mass <= 0.0:
        return None
    probabilities = {value: stated(seen.get(value, 0.0) / mass) for value in sorted(wanted.values())}
    expected = expected_score(seen)
    argmax = max(probabilities, key=lambda value: (probabilities[value], -value))
    return ScoreDistribution(probabilities=probabilities, expected=expected, mass=mass, argmax=argmax)


def expected_score(weights: Mapping[Value, float]) -> float:
    """G-Eval's weighted score: sum(value * p) / sum(p) over the score values given.

    Probability the model put on tokens that are no score value is not in the mapping; dividing by
    the mass that is renormalises over the score values, as G-Eval does. Each term is renormalised
    before it is weighted, and the terms are summed with fsum; the result is written at the stated
    precision (pipeline.numbers), so it is the same bytes on every Python."""
    if any(p < 0 or not math.isfinite(p) for p in weights.values()):
        raise ValueError("a probability is negative or not finite")
    mass = fsum(weights.values())
    if mass <= 0:
        raise ValueError("no probability on any score value")
    return stated(fsum(value * (weights[value] / mass) for value in sorted(weights)))


def field_distribution(
    text: str,
    logprobs: Sequence[TokenLogprob] | None,
    field: str,
    allowed: Iterable[int] = LIKERT_VALUES,
) -> ScoreDistribution | None:
    """The distribution over `allowed` at the value of the JSON integer field `field` of a reply
    (`text`, the reply's `logprobs`): None when the reply carried no log-probabilities, writes no such
    field, or no allowed value is among the alternatives there."""
    if not logprobs:
        return None
    span = integer_field_span(text, field)
    return None if span is None else score_distribution(logprobs, span[0], allowed)
