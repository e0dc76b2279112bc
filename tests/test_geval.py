"""G-Eval's weighting: the distribution over the allowed scores at the token that wrote a score, and
its expected value."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.judges.geval import expected_score, field_distribution, score_distribution
from pipeline.judges.likert import LIKERT_VALUES, to_unit
from pipeline.llm.logprobs import integer_field_span
from pipeline.llm.types import TokenLogprob, TopLogprob


def _token(text: str, *alternatives: tuple[str, float]) -> TokenLogprob:
    top = tuple(TopLogprob(token=t, logprob=lp) for t, lp in alternatives)
    return TokenLogprob(token=text, logprob=top[0].logprob if top else -0.01, top=top)


def test_score_distribution_weighs_the_allowed_values() -> None:
    text = '{"score": 4}'
    p4, p5, p3, other = 0.5, 0.2, 0.1, 0.15
    tokens = [
        _token('{"'),
        _token("score"),
        _token('":'),
        _token(" "),
        _token("4", ("4", math.log(p4)), ("5", math.log(p5)), (" 3", math.log(p3)), ("x", math.log(other))),
        _token("}"),
    ]
    span = integer_field_span(text, "score")
    assert span == (10, 11)
    dist = score_distribution(tokens, span[0], range(1, 6))
    assert dist is not None
    mass = p4 + p5 + p3
    assert dist.mass == pytest.approx(mass)
    assert dist.probabilities == pytest.approx({1: 0.0, 2: 0.0, 3: p3 / mass, 4: p4 / mass, 5: p5 / mass})
    assert dist.expected == pytest.approx((3 * p3 + 4 * p4 + 5 * p5) / mass)
    assert dist.argmax == 4


def test_score_distribution_without_an_allowed_value_or_token_is_none() -> None:
    tokens = [_token("ab", ("ab", -0.1), ("cd", -2.0))]
    assert score_distribution(tokens, 0, range(1, 6)) is None
    assert score_distribution(tokens, 5, range(1, 6)) is None
    assert integer_field_span('{"other": 2}', "score") is None


def test_expected_score_is_the_probability_weighted_mean_over_score_values() -> None:
    assert expected_score({1: 0.1, 2: 0.2, 5: 0.2}) == pytest.approx((0.1 + 0.4 + 1.0) / 0.5)
    assert expected_score({4: 1.0}) == 4
    with pytest.raises(ValueError):
        expected_score({})
    with pytest.raises(ValueError):
        expected_score({1: -0.1, 2: 0.5})


def test_a_reply_s_field_is_read_where_its_value_is_written() -> None:
    text = '{"reason": "3 of 4 points", "score": 4}'
    tokens = [_token(ch) for ch in text[:-2]]
    tokens += [_token("4", ("4", math.log(0.6)), ("5", math.log(0.4))), _token("}")]
    dist = field_distribution(text, tokens, "score")
    assert dist is not None and dist.probabilities == pytest.approx({1: 0, 2: 0, 3: 0, 4: 0.6, 5: 0.4})
    assert dist == score_distribution(tokens, text.index(": 4") + 2, LIKERT_VALUES)
    assert field_distribution(text, None, "score") is None  # no log-probabilities asked for
    assert field_distribution(text, (), "score") is None
    assert field_distribution(text, tokens, "rating") is None  # no such field


@given(st.dictionaries(st.sampled_from(LIKERT_VALUES), st.floats(0.0, 1.0), min_size=1))
def test_the_weighting_lies_on_the_scale_whatever_the_order(weights: dict[int, float]) -> None:
    if sum(weights.values()) <= 0:
        return
    backwards = dict(sorted(weights.items(), reverse=True))
    assert expected_score(backwards) == pytest.approx(expected_score(weights))
    assert LIKERT_VALUES[0] - 1e-9 <= expected_score(weights) <= LIKERT_VALUES[-1] + 1e-9


def test_the_likert_scale_maps_onto_zero_to_one_exactly() -> None:
    assert [to_unit(s) for s in LIKERT_VALUES] == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert to_unit(4.4) == pytest.approx(0.85)
