"""Fraction verdicts in prose ("N out of M" bound to a verb or a noun), counts told apart, linear time.

The properties are the contract of pipeline.judges.scores.fraction_verdicts: a fraction verdict is read
exactly whatever prose and metric names surround it; a counting phrase anywhere never becomes a
verdict, and never overrides the last one; the fraction and integer forms of a verdict agree; and the
work done grows linearly with the reply, shown by counting steps rather than by a clock.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.judges.scores import READ_REASONS, Reason, Scale, extract_score
from tests.test_scores import FORMATS, SCALES, _fill, noise, on_scale

ONE_TO_FIVE = Scale(1, 5)
ONE_TO_TEN = Scale(1, 10, integer=False)
F, T = ONE_TO_FIVE, ONE_TO_TEN


@pytest.mark.parametrize(
    ("text", "scale", "score", "reason"),
    [
        # the verdict as a verb, the object in between
        ("I would grade this reply as 4 out of 5.", F, 4, "verdict_verb"),
        ("Overall, I would rate the AI assistant's response as an 8 out of 10.", T, 8, "fraction_verb"),
        (
            "As an impartial judge, I would rate the response provided by the AI assistant to the user "
            'question "Why is the sky blue?" a 7 out of 10.',
            T,
            7,
            "fraction_verb",
        ),
        ("I would rate the reply to the question whether 9/11 was planned a 6/10.", T, 6, "fraction_verb"),
        # an article, an adjective before the number
        ("Overall, the summary earns a solid 4 out of 5.", F, 4, "fraction_verb"),
        ("I'd give the candidate's summary a well-deserved 4/5 for coherence.", F, 4, "fraction_verb"),
        ("It is a 4 out of 5 from me.", F, 4, "fraction_verb"),
        ("This would be an 8/10 overall.", T, 8, "fraction_verb"),
        # the metric after it
        ("The summary is 4 out of 5 in terms of relevance.", F, 4, "fraction_verb"),
        ("I would score the reply 3 out of 5 in terms of accuracy: a date is wrong.", F, 3, "verdict_verb"),
        # a score noun bound to the reply
        ("The summary has a score of 4 out of 5 for accuracy.", F, 4, "fraction_noun"),
        ("I would rate the response with a score of 7 out of 10.", T, 7, "verdict_clause"),
        ("My overall assessment is 4 out of 5.", F, 4, "fraction_noun"),
        ("Final verdict: 4/5", F, 4, "fraction_noun"),
        # a participle
        ("It misses the duration, thus rating it 4 out of 5.", F, 4, "phrase"),
        # the verdict at the end after a long justification
        ("The summary quotes the patient.\nIt misses the duration.\n\n4 out of 5.", F, 4, "fraction_closing"),
        ("The summary is complete. Overall, 4/5.", F, 4, "fraction_closing"),
        ("Clear and complete.\n\nIn conclusion: **4/5**", F, 4, "fraction_closing"),
        ("4/5", F, 4, "bare_number"),  # the whole reply: a bare number, as before
        # the integer form with a longer object
        ("I would rate the response provided by the AI assistant as a 2.", F, 2, "verdict_verb"),
        ("The response has a score of 4 for coherence.", F, 4, "verdict_clause"),
        # the last verdict wins; a count after it changes nothing
        ("I'd rate it 2 out of 5. No: I would grade the reply as a 4 out of 5.", F, 4, "verdict_verb"),
        ("I would rate the reply as a 4 out of 5. It covers 3 out of 5 symptoms.", F, 4, "phrase"),
        # counts, never a verdict
        ("It covers 3 out of the 5 sections.", F, None, "no_score"),
        ("2 out of 4 claims are supported.", F, None, "no_score"),
        ("It gets 2 out of 4 claims right.", F, None, "no_score"),
        ("The assessment mentions 3 out of 5 symptoms.", F, None, "no_score"),
        ("Overall, 3 out of 5 symptoms are covered.", F, None, "no_score"),
        ("In 2 out of 3 cases the quotes are exact.", F, None, "no_score"),
        ("Of the symptoms, it names 3 out of 5.", F, None, "no_score"),
        ("The patient scored 14 out of 24 on the PHQ-8.", F, None, "no_score"),
        ("The patient rated her mood 2 out of 10.", T, None, "no_score"),
        # rubric echoes, hypotheticals, thresholds, choices
        ("A response that has a score of 5 out of 5 for accuracy is flawless.", F, None, "no_score"),
        ("A score of 5 out of 5 is for flawless summaries.", F, None, "no_score"),
        ("5 out of 5: no mistakes.", F, None, "no_score"),
        ("Any summary with a rating of 4/5 quotes the patient.", F, None, "no_score"),
        ("I would rate it 4 out of 5 if it quoted the patient.", F, None, "no_score"),
        ("I would have given it a 5 out of 5, but the dates are wrong.", F, None, "no_score"),
        ("To earn a 5 out of 5, it would need quotes.", F, None, "no_score"),
        ("It needs a 3 out of 5 or higher to pass.", F, None, "no_score"),
        ("I would rate it a 4 out of 5 or a 5 out of 5.", F, None, "ambiguous"),
        ("I do not think it deserves a 5 out of 5.", F, None, "no_score"),
        ("It hardly deserves a 4 out of 5.", F, None, "no_score"),
        ("The rubric says to rate the response as a 5 out of 5 when it is flawless.", F, None, "no_score"),
        ("Rating it 4 out of 5 would be too generous.", F, None, "no_score"),
        ("Raters gave each poor response a 1 out of 5 for relevance.", F, None, "no_score"),
        # the scale check, as for every verdict
        ("I would rate the AI assistant's response as an 8 out of 10.", F, None, "scale_mismatch"),
        ("I would rate the AI assistant's response as a 7 out of 5.", F, None, "out_of_range"),
        ("I would grade this reply as 3.5 out of 5.", F, None, "non_integer"),
    ],
)
def test_fraction_verdicts(text: str, scale: Scale, score: int | None, reason: Reason) -> None:
    reading = extract_score(text, scale)
    assert (reading.score, reading.reason) == (score, reason), reading


def test_a_decimal_is_read_as_stated_and_the_policy_decides() -> None:
    text = "Overall, I would rate the AI assistant's response as a 3.5 out of 5."
    unscored, rounded, kept = (
        extract_score(text, ONE_TO_FIVE, decimals=policy) for policy in ("unscored", "round", "keep")
    )
    assert (unscored.score, unscored.reason, unscored.stated) == (None, "non_integer", 3.5)
    assert (rounded.score, rounded.reason, rounded.stated) == (4, "decimal_rounded", 3.5)
    assert (kept.score, kept.reason, kept.stated) == (3.5, "decimal_kept", 3.5)
    assert unscored.matched == rounded.matched == kept.matched


# ---------------------------------------------------------------------------------------------------
# Properties

# {f}: the fraction; {o}: what is judged; {m}: a metric name; {q}: a quoted question; {j}: a justification.
FRACTION_VERB = [
    "I would grade this {o} as {f}.",
    "Overall, I would rate the {o} as a {f} for {m}.",
    "All things considered, the {o} earns a solid {f}.",
    "I'd give the {o} a {f} in terms of {m}.",
    'As an impartial judge, I would rate the {o} provided by the AI assistant to the question "{q}" a {f}.',
    "The {o} is {f} in terms of {m}.",
    "This is a {f} overall.",
]
FRACTION_NOUN = [
    "The {o} has a score of {f} for {m}.",
    "I would rate the {o} with a score of {f}.",
    "My overall assessment is {f}.",
    "It is mostly right, with an overall rating of {f}.",
    "Final verdict: {f}.",
]
FRACTION_CLOSING = ["{j}\nOverall, {f}.", "{j} In conclusion: {f}."]
# Without a concluding word, the fraction must be the reply's last words.
FRACTION_CLOSING_LAST = ["{j}\n\n{f}.", "{j}\n{f}"]
KINDS = {"fraction_verb": FRACTION_VERB, "fraction_noun": FRACTION_NOUN, "fraction_closing": FRACTION_CLOSING}
FRACTIONS = ["{v} out of {max}", "{v}/{max}", "**{v}/{max}**", "{v} / {max}"]
OBJECTS = ["response", "reply", "summary", "AI assistant's response", "candidate's answer", "assessment"]
metric_names = st.from_regex(r"[a-z][a-z-]{2,14}", fullmatch=True)
questions = st.text(alphabet="abcdefghij klmnopqrstuvwxyz,?'0123456789/", min_size=1, max_size=60)
justifications = st.sampled_from(
    [
        "The summary quotes the patient and covers the main symptoms.",
        "It misses the duration of the low mood, and one quote is paraphrased.",
        "Clear, well organised, and faithful to the transcript.",
    ]
)


@st.composite
def fraction_verdict(draw: st.DrawFn, scale: Scale, kind: str, value: str, last: bool = False) -> str:
    fraction = draw(st.sampled_from(FRACTIONS)).replace("{max}", _num(scale.max)).replace("{v}", value)
    template = draw(st.sampled_from(FRACTION_CLOSING_LAST if last else KINDS[kind]))
    return template.format(
        f=fraction,
        o=draw(st.sampled_from(OBJECTS)),
        m=draw(metric_names),
        q=draw(questions),
        j=draw(justifications),
    )


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    scale=st.sampled_from(SCALES),
    kind=st.sampled_from(list(KINDS)),
    before=st.sampled_from(["\n", "\n\n", ". "]),
    after=st.sampled_from(["\n", "\n\n", " ", "\n---\n"]),
    last=st.booleans(),
)
def test_property_a_fraction_verdict_is_found_whatever_surrounds_it(
    data: st.DataObject, scale: Scale, kind: str, before: str, after: str, last: bool
) -> None:
    """A fraction verdict of any form, with any metric name and question, between verdict-free text
    (rubric echoes, counts, other numbers), is read back exactly with its own reason."""
    value = data.draw(on_scale(scale))
    last = last and kind == "fraction_closing"
    verdict = data.draw(fraction_verdict(scale, kind, value, last))
    prefix = data.draw(noise())
    suffix = "" if last else data.draw(noise())
    text = (prefix + before if prefix else "") + verdict + (after + suffix if suffix else "")
    reading = extract_score(text, scale)
    assert reading.score == float(value), (text, reading)
    # where an older reading reads the same number, its reason stays
    older = {"verdict_verb", "verdict_clause", "verdict_named", "phrase"}
    assert reading.reason in {kind, *older}, (text, reading)


# A count: the fraction binds to a counted noun, follows "of the", or a verb that counts.
COUNTS = [
    "It covers {a} out of the {b} sections.",
    "{a} out of {b} claims are supported.",
    "Only {a} out of {b} quotes are verbatim.",
    "The summary mentions {a} out of {b} symptoms.",
    "In {a} out of {b} cases the dates are right.",
    "It gets {a} out of {b} questions right.",
    "The assessment addresses {a}/{b} criteria.",
    "Of the {b} symptoms, it describes {a}.",
    "The patient reported {a} out of {b} PHQ-8 symptoms over 2 weeks.",
    "Overall, {a} out of {b} sentences quote the patient.",
    "It scored {a} out of {b} points on the quiz.",
    "A {a} out of {b} chance of relapse is mentioned.",
]


@st.composite
def count_phrase(draw: st.DrawFn, scale: Scale) -> str:
    b = draw(st.one_of(st.just(int(scale.max)), st.integers(1, 12)))
    a = draw(st.integers(0, b))
    return draw(st.sampled_from(COUNTS)).format(a=a, b=b)


@st.composite
def with_counts(draw: st.DrawFn, text: str, scale: Scale, *, inside: bool = True) -> str:
    """``text`` with counting phrases placed between its lines (``inside``), or before and after it."""
    pieces = text.split("\n") if inside else [text]
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(pieces)))
        pieces.insert(at, draw(count_phrase(scale)))
    return "\n".join(pieces)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), scale=st.sampled_from(SCALES))
def test_property_a_count_anywhere_is_never_a_verdict(data: st.DataObject, scale: Scale) -> None:
    text = data.draw(with_counts(data.draw(noise()), scale))
    reading = extract_score(text, scale)
    assert reading.score is None, (text, reading)
    assert reading.reason not in READ_REASONS


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    scale=st.sampled_from(SCALES),
    # a bare number is only a verdict when it is the whole reply
    kind=st.sampled_from([kind for kind in (*FORMATS, *KINDS) if kind != "bare_number"]),
)
def test_property_a_count_anywhere_never_overrides_the_verdict(
    data: st.DataObject, scale: Scale, kind: str
) -> None:
    value = data.draw(on_scale(scale))
    if kind in KINDS:
        verdict = data.draw(fraction_verdict(scale, kind, value))
    else:
        verdict = _fill(data.draw(st.sampled_from(FORMATS[kind])), value, scale)
    text = data.draw(with_counts(verdict, scale, inside=False))
    reading = extract_score(text, scale)
    assert reading.score == float(value), (text, reading)


# The same verdict with an integer and with a fraction: {x}.
AGREEING = [
    "I would rate the {o} as a {x}.",
    "I would grade this reply {x}.",
    "Overall, it earns a {x} for {m}.",
    "The {o} deserves a {x}.",
    "The {o} has a score of {x} for {m}.",
    "I'd give the {o} a {x}.",
    "It misses the duration, thus rating it {x}.",
    "I would rate the {o} provided by the AI assistant a {x}.",
    "It warrants an overall rating of {x}.",
]


@settings(max_examples=400, deadline=None)
@given(
    data=st.data(),
    scale=st.sampled_from(SCALES),
    template=st.sampled_from(AGREEING),
    fraction=st.sampled_from(["{v} out of {max}", "{v}/{max}"]),
)
def test_property_fraction_and_integer_forms_agree(
    data: st.DataObject, scale: Scale, template: str, fraction: str
) -> None:
    value = data.draw(on_scale(scale))
    words = {"o": data.draw(st.sampled_from(OBJECTS)), "m": data.draw(metric_names)}
    as_integer = template.format(x=value, **words)
    as_fraction = template.format(x=fraction.format(v=value, max=_num(scale.max)), **words)
    integer, fractional = extract_score(as_integer, scale), extract_score(as_fraction, scale)
    assert integer.score == fractional.score == float(value), (as_integer, integer, as_fraction, fractional)
    wrong = template.format(x=fraction.format(v=value, max=_num(scale.max) + "0"), **words)
    assert extract_score(wrong, scale).reason == "scale_mismatch"


# ---------------------------------------------------------------------------------------------------
# Linear time, by counting steps: every Python-level call and every call into C (each regex scan, each
# string method) the extractor makes is one step. The regexes themselves have bounded widths
# (tests/test_scores_grammar.py), so each step reads a bounded number of characters; here the number of
# steps must grow no faster than the reply: twice the text, at most about twice the steps.


def _steps(function: Callable[[], Any]) -> int:
    count = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(profile)
    try:
        function()
    finally:
        sys.setprofile(None)
    return count


# Each builds a reply of about n units: long runs of one character, and repeats of the shapes the
# patterns bind to, with and without a verdict among them.
PATHOLOGICAL: dict[str, Callable[[int], str]] = {
    "a label, then blanks": lambda n: "Score:" + " " * (50 * n) + "x",
    "a digit, then markdown": lambda n: "4" + "*" * (50 * n) + "x",
    "an unclosed object": lambda n: "{" + "score " * (10 * n),
    "a verb, then blanks": lambda n: "I rate it" + " " * (50 * n) + "x",
    "brackets": lambda n: "[[" * (20 * n),
    "rubric lines": lambda n: " - score of 5 : 0 mistakes\n" * n,
    "labelled verdicts": lambda n: "Score: 4 " * n,
    "choices": lambda n: "Rating: [[3]] or [[4]] " * n,
    "ranges in phrases": lambda n: "I give it a score of 3-4. " * n,
    "an object that never ends": lambda n: "I would rate the response provided by the AI assistant to " * n,
    "fraction verdicts": lambda n: "rate the reply as a 4 out of 5 " * n,
    "fractions alone on lines": lambda n: "4 out of 5\n" * n,
    "closing fractions": lambda n: "Overall, 4/5. " * n,
    "counts": lambda n: "It covers 3 out of 5 symptoms. " * n,
    "quotations": lambda n: '"quote" ' * n,
    "articles": lambda n: "a a a a a a " * n,
    "score nouns": lambda n: "has a score of 4 out of 5 for " * n,
    "generic subjects": lambda n: "A response that has a score of 5 out of 5 " * n,
}


@pytest.mark.parametrize("shape", sorted(PATHOLOGICAL))
def test_steps_grow_linearly_with_the_reply(shape: str) -> None:
    build = PATHOLOGICAL[shape]
    extract_score(build(1), ONE_TO_TEN)  # compile and cache the patterns before counting
    small = _steps(lambda: extract_score(build(200), ONE_TO_TEN))
    large = _steps(lambda: extract_score(build(800), ONE_TO_TEN))
    assert large <= 4 * 1.25 * small, f"{shape}: 4 times the reply took {large / small:.1f} times the steps"


def test_the_step_count_catches_quadratic_work() -> None:
    """The check above can fail: checking every candidate against every other is caught."""

    def quadratic(text: str) -> None:
        words = text.split()
        for word in words:
            for other in words:
                word.startswith(other)

    ratio = _steps(lambda: quadratic("x " * 800)) / _steps(lambda: quadratic("x " * 200))
    assert ratio > 4 * 1.25


def test_steps_are_bounded_per_character_on_arbitrary_text() -> None:
    text = "I would rate the AI assistant's response as an 8 out of 10. It covers 3 out of 5 symptoms.\n"
    text *= 300
    assert _steps(lambda: extract_score(text, ONE_TO_TEN)) <= 2 * len(text)
