"""Derived numbers at a stated precision, computed with the standard library (pipeline.numbers),
and the embedded model's log-probabilities defined by its logits alone."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from pipeline.judges.geval import expected_score
from pipeline.llm.backends.embedded_logprobs import SPAN, log_softmax_step
from pipeline.numbers import SIGNIFICANT, fsum, stated


def test_a_last_bit_difference_changes_no_byte() -> None:
    # The example: numpy 2.4 and 2.5 wrote these two for the same probability.
    assert repr(stated(0.1228595762544089)) == repr(stated(0.12285957625440888)) == "0.122859576254"
    assert stated(-0.0) == 0.0 and repr(stated(-0.0)) == "0.0"
    assert math.isnan(stated(math.nan)) and stated(math.inf) == math.inf


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_stated_keeps_the_stated_digits(value: float) -> None:
    once = stated(value)
    assert stated(once) == once  # idempotent: a replay of a replay writes the same
    if value:
        assert math.isclose(once, value, rel_tol=10 ** (1 - SIGNIFICANT))


def test_fsum_is_correctly_rounded_in_any_order() -> None:
    values = [0.1] * 10 + [1e16, -1e16]
    assert fsum(values) == fsum(reversed(values)) == 1.0


def test_expected_score_is_stated() -> None:
    assert expected_score({1: 0.2, 2: 0.3, 5: 0.5}) == stated(1 * 0.2 + 2 * 0.3 + 5 * 0.5)


def _reference(logits: np.ndarray) -> np.ndarray:
    wide = logits.astype(np.float64)
    peak = float(np.max(wide))
    normaliser = peak + math.log(math.fsum(math.exp(v) for v in (wide - peak).tolist()))
    out: np.ndarray = wide - normaliser
    return out


def test_log_softmax_matches_the_exact_one_and_orders_ties_by_id() -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 4, 4096).astype(np.float32)
    logits[[7, 9, 11]] = logits.max() + 1  # a three-way tie at the top
    logits[100] = logits.max() - SPAN - 1  # below the span: its mass is below the last bit
    token, logprob, top = log_softmax_step(logits, 9, 4)
    exact = _reference(logits)
    assert token == 9 and math.isclose(logprob, float(exact[9]), rel_tol=1e-15, abs_tol=1e-15)
    assert [i for i, _ in top][:3] == [7, 9, 11]
    assert top[0][1] == top[1][1] == top[2][1] == logprob
    assert [lp for _, lp in top] == sorted((lp for _, lp in top), reverse=True)


def test_log_softmax_does_not_depend_on_the_logits_array_layout() -> None:
    logits = np.random.default_rng(1).normal(0, 3, 1000).astype(np.float32)
    strided = np.empty(2000, dtype=np.float32)[::2]
    strided[:] = logits
    assert log_softmax_step(logits, 3, 5) == log_softmax_step(strided, 3, 5)
