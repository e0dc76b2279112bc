"""The last prose forms (issue 30), each read with any score on the scale and its counter-forms never read.

1. a result clause whose score noun carries a qualifier ("resulting in a low relevance score of 2");
2. a verdict closing the reply after a semicolon or a comma ("...; 4 out of 5.", "..., score of 4.");
3. a predicate fraction with a metric ("is a 4 out of 5 in relevance", "scores a relevance of 4 out of 5");
4. a closing parenthesized fraction ("... therefore it is irrelevant (2/5).");
5. number words where the digit would be a verdict ("a score of two", "scoring a one out of five");
6. a multi-metric reply read for the metric the call asked for ("Coherence: 4/5" among other lines).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.judges.scores import READ_REASONS, Reason, Scale, extract_score
from tests.test_scores import FORMATS, SCALES, _fill, noise, on_scale

F, T = Scale(1, 5), Scale(1, 10)
ADJECTIVES = ["low", "high", "perfect", "solid", "moderate", "final", "decent", "poor", "overall"]
METRICS = ["relevance", "fluency", "coherence", "consistency", "accuracy", "helpfulness", "readability"]
OBJECTS = ["summary", "response", "answer", "assessment", "reply"]
JUSTIFICATIONS = [
    "The summary covers the main points but misses the date of the event",
    "It is fluent and clear, though one sentence repeats the previous one",
    "The response drifts from the question and adds details the article never mentions",
]
PROPERTY = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _max(scale: Scale) -> str:
    return str(int(scale.max)) if float(scale.max).is_integer() else str(scale.max)


@st.composite
def words(draw: st.DrawFn) -> dict[str, str]:
    return {
        "adj": draw(st.sampled_from(ADJECTIVES)),
        "m": draw(st.sampled_from(METRICS)),
        "o": draw(st.sampled_from(OBJECTS)),
        "j": draw(st.sampled_from(JUSTIFICATIONS)),
    }


@st.composite
def surrounded(draw: st.DrawFn, verdict: str, *, closing: bool = False) -> str:
    """``verdict`` after verdict-free text (rubric echoes, distractors) and, unless it must close the
    reply, before more of it."""
    before = draw(noise())
    after = "" if closing else draw(noise())
    return (before + "\n\n" if before else "") + verdict + ("\n\n" + after if after else "")


def _assert_read(text: str, scale: Scale, value: str, reasons: set[str], **kwargs: object) -> None:
    reading = extract_score(text, scale, **kwargs)  # type: ignore[arg-type]
    assert reading.score == float(value), (text, reading)
    assert reading.reason in reasons, (text, reading)


def _assert_unread(text: str, scale: Scale, **kwargs: object) -> None:
    reading = extract_score(text, scale, **kwargs)  # type: ignore[arg-type]
    assert reading.score is None and reading.reason not in READ_REASONS, (text, reading)


# ---------------------------------------------------------------------------------------------------
# 1. A result clause with a qualified score noun

RESULT_FORMS = [
    "{j}, resulting in a {adj} {m} score of {v}.",
    "{j}, resulting in a {m} score of {v}.",
    "{j}, leading to a score of {v}.",
    "{j}, leading to a {adj} rating of {v} for {m}.",
    "{j}, thus scoring a {adj} {m} rating of {v}.",
    "{j}, making it a {adj} {m} score of {v}.",
    "{j}. This results in a {adj} {m} grade of {v}.",
]
# A qualifier that negates or hedges, a comparison, or a score noun no verb binds.
RESULT_COUNTERS = [
    "{j}, but it is not a perfect score of {v}.",
    "{j}, so it falls short of a score of {v}.",
    "{j}, resulting in nearly a perfect score of {v}.",
    "{j}, leading to less than a {m} score of {v}.",
    "{j}, resulting in a lower {m} score of {v} than the reference.",
    "{j}; a perfect score of {v} needs more.",
    "{j}, leading to almost a {adj} {m} score of {v}.",
]


@PROPERTY
@given(data=st.data(), scale=st.sampled_from(SCALES), template=st.sampled_from(RESULT_FORMS))
def test_property_a_qualified_result_clause_is_read(data: st.DataObject, scale: Scale, template: str) -> None:
    value = data.draw(on_scale(scale))
    verdict = template.format(v=value, **data.draw(words()))
    _assert_read(data.draw(surrounded(verdict)), scale, value, {"verdict_clause", "phrase"})


@PROPERTY
@given(data=st.data(), scale=st.sampled_from(SCALES), template=st.sampled_from(RESULT_COUNTERS))
def test_property_a_hedged_or_negated_qualifier_is_never_read(
    data: st.DataObject, scale: Scale, template: str
) -> None:
    value = data.draw(on_scale(scale))
    _assert_unread(data.draw(surrounded(template.format(v=value, **data.draw(words())))), scale)


# ---------------------------------------------------------------------------------------------------
# 2. A verdict closing the reply after a semicolon or a comma

CLOSING_FORMS = [
    "{j}; {v} out of {max}.",
    "{j}, {v} out of {max}.",
    "{j}; {v}/{max}",
    "{j}, score of {v}.",
    "{j}; score of {v}.",
    "{j}; a final score of {v}.",
    "{j}, rating of {v}",
]


@PROPERTY
@given(data=st.data(), scale=st.sampled_from(SCALES), template=st.sampled_from(CLOSING_FORMS))
def test_property_a_verdict_closing_the_reply_after_a_comma_is_read(
    data: st.DataObject, scale: Scale, template: str
) -> None:
    value = data.draw(on_scale(scale))
    verdict = template.format(v=value, max=_max(scale), **data.draw(words()))
    # "a final score of 4" is a verdict wherever it stands (verdict_named)
    reasons = {"fraction_closing", "verdict_closing", "verdict_named"}
    _assert_read(data.draw(surrounded(verdict, closing=True)), scale, value, reasons)


@PROPERTY
@given(
    data=st.data(),
    scale=st.sampled_from(SCALES),
    template=st.sampled_from([form for form in CLOSING_FORMS if "final" not in form]),
    more=st.sampled_from(JUSTIFICATIONS),
)
def test_property_the_same_phrase_mid_reply_is_never_read(
    data: st.DataObject, scale: Scale, template: str, more: str
) -> None:
    """Followed by another sentence, the phrase is a count or a description, not the closing verdict."""
    value = data.draw(on_scale(scale))
    text = template.format(v=value, max=_max(scale), **data.draw(words())) + " " + more + "."
    _assert_unread(data.draw(surrounded(text)), scale)


@PROPERTY
@given(data=st.data(), b=st.integers(2, 12), claims=st.sampled_from(["claims", "sentences", "facts"]))
def test_property_a_count_after_a_comma_is_never_read(data: st.DataObject, b: int, claims: str) -> None:
    a = data.draw(st.integers(0, b))
    j = data.draw(st.sampled_from(JUSTIFICATIONS))
    for text in (f"{j}; {a} out of {b} {claims}.", f"{j}, {a}/{b} {claims} are supported.", "1, 2, 3/5."):
        _assert_unread(data.draw(surrounded(text, closing=True)), Scale(0, 12))


# ---------------------------------------------------------------------------------------------------
# 3. A predicate fraction with a metric

PREDICATE_FORMS = [
    "The {o} is a {v} out of {max} in {m} because {j}.",
    "{j}, making it a {v} out of {max} in terms of {m}.",
    "The {o} scores a {m} of {v} out of {max}.",
    "Overall, the {o} is a {v}/{max} in {m}.",
    "{j}, making it a solid {v} out of {max} in {m}.",
]
PREDICATE_COUNTERS = [
    "There is a {a} out of {b} chance that the {o} is wrong.",
    "{a} out of {b} sentences in the {o} are accurate.",
    "The {o} is a {a} out of {b} chance at best.",
    "It is a {a} out of {b} in addition to the rest.",
    "The {o} scored a proportion of {a} out of {b}.",
    "It makes this a {a} out of {b} chance.",
]


@PROPERTY
@given(data=st.data(), scale=st.sampled_from(SCALES), template=st.sampled_from(PREDICATE_FORMS))
def test_property_a_predicate_fraction_with_a_metric_is_read(
    data: st.DataObject, scale: Scale, template: str
) -> None:
    value = data.draw(on_scale(scale))
    verdict = template.format(v=value, max=_max(scale), **data.draw(words()))
    _assert_read(
        data.draw(surrounded(verdict)), scale, value, {"fraction_verb", "fraction_noun", "verdict_verb"}
    )


@PROPERTY
@given(data=st.data(), b=st.integers(1, 12), template=st.sampled_from(PREDICATE_COUNTERS))
def test_property_a_chance_or_a_count_is_never_read(data: st.DataObject, b: int, template: str) -> None:
    a = data.draw(st.integers(0, b))
    text = template.format(a=a, b=b, **data.draw(words()))
    _assert_unread(data.draw(surrounded(text)), Scale(0, 12))


# ---------------------------------------------------------------------------------------------------
# 4. A closing parenthesized fraction

PARENTHESIZED_FORMS = [
    "{j}; therefore it is irrelevant ({v}/{max}).",
    "{j}. The {o} is mostly faithful ({v} out of {max})",
    "{j}, so I rate it as {adj} ({v}/{max}).",
]
PARENTHESIZED_COUNTERS = [
    "{j} ({a}/{b} claims).",
    "It supports {a} of the {b} claims ({a}/{b}).",
    "{j} ({a}/{b} claims). The rest is fine.",
    "{j} ({a}/{b}). The rest is fine.",
]


@PROPERTY
@given(data=st.data(), scale=st.sampled_from(SCALES), template=st.sampled_from(PARENTHESIZED_FORMS))
def test_property_a_closing_parenthesized_fraction_is_read(
    data: st.DataObject, scale: Scale, template: str
) -> None:
    value = data.draw(on_scale(scale))
    verdict = template.format(v=value, max=_max(scale), **data.draw(words()))
    _assert_read(data.draw(surrounded(verdict, closing=True)), scale, value, {"fraction_closing"})


@PROPERTY
@given(data=st.data(), b=st.integers(1, 12), template=st.sampled_from(PARENTHESIZED_COUNTERS))
def test_property_a_parenthesized_count_is_never_read(data: st.DataObject, b: int, template: str) -> None:
    a = data.draw(st.integers(0, b))
    text = template.format(a=a, b=b, **data.draw(words()))
    _assert_unread(data.draw(surrounded(text, closing=True)), Scale(0, 12))


# ---------------------------------------------------------------------------------------------------
# 5. Number words in a verdict position

NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
WORD_FORMS = [
    "{j}, with a score of {w}.",
    "{j}. I give it a score of {w}.",
    "The {o} is poor, scoring a {w} out of {W}.",
    "I would rate the {o} {w} out of {W} for {m}.",
    "{j}, resulting in a {m} score of {w}.",
    "{j}; {w} out of {W}.",
]
WORD_COUNTERS = [
    "It covers one of the {W} points.",
    "{w} out of {W} sentences are accurate.",
    "I would rate this one highly, and that one too.",
    "I compared the answers one by one.",
    "It is a one-sided {o} with {w} quotes.",
    "The {o} gets {w} things right and misses the rest.",
    "To earn a score of {w}, it would need quotes.",
]


@PROPERTY
@given(
    data=st.data(),
    scale=st.sampled_from([F, T, Scale(0, 1), Scale(1, 3)]),
    template=st.sampled_from(WORD_FORMS),
)
def test_property_a_number_word_in_a_verdict_position_is_read(
    data: st.DataObject, scale: Scale, template: str
) -> None:
    value = data.draw(st.integers(int(scale.min), int(scale.max)))
    word = data.draw(st.sampled_from([NUMBER_WORDS[value], NUMBER_WORDS[value].capitalize()]))
    verdict = template.format(w=word, W=NUMBER_WORDS[int(scale.max)], **data.draw(words()))
    closing = template.startswith("{j};")
    reading = extract_score(data.draw(surrounded(verdict, closing=closing)), scale)
    assert reading.score == value, (verdict, reading)
    assert reading.matched is not None and word in reading.matched


@PROPERTY
@given(data=st.data(), template=st.sampled_from(WORD_COUNTERS), value=st.integers(0, 10))
def test_property_a_number_word_elsewhere_is_never_read(
    data: st.DataObject, template: str, value: int
) -> None:
    text = template.format(w=NUMBER_WORDS[value], W=NUMBER_WORDS[10], **data.draw(words()))
    _assert_unread(data.draw(surrounded(text)), Scale(0, 10))


@PROPERTY
@given(data=st.data(), scale=st.sampled_from(SCALES), kind=st.sampled_from(list(FORMATS)))
def test_property_a_number_word_elsewhere_never_overrides_the_verdict(
    data: st.DataObject, scale: Scale, kind: str
) -> None:
    value = data.draw(on_scale(scale))
    verdict = _fill(data.draw(st.sampled_from(FORMATS[kind])), value, scale)
    counter = data.draw(st.sampled_from(WORD_COUNTERS)).format(w="two", W="five", **data.draw(words()))
    text = counter + "\n" + verdict if kind != "bare_number" else verdict
    assert extract_score(text, scale).score == float(value), text


# ---------------------------------------------------------------------------------------------------
# 6. A multi-metric reply, read for the metric the call asked for

LINE_FORMS = [
    "{M}: {v}/{max}",
    "**{M}:** {v}",
    "- {M} score: {v}",
    "{n}. {M} (1-{max}): {v}",
    "{M} - {v}/{max}",
]


@st.composite
def multi_metric_reply(
    draw: st.DrawFn, scale: Scale, ours: str | None, value: str, absent: str | None = None
) -> str:
    """Lines for two to four metrics other than ``ours`` (and ``absent``), ``ours`` among them with
    ``value`` when given, in any order, perhaps an overall line after them."""
    pool = [m for m in METRICS if m not in (ours, absent)]
    others = draw(st.lists(st.sampled_from(pool), min_size=2, max_size=4, unique=True))
    names = [*others, *([ours] if ours else [])]
    names = draw(st.permutations(names))
    form = draw(st.sampled_from(LINE_FORMS))
    lines = []
    for n, name in enumerate(names, 1):
        v = value if name == ours else draw(on_scale(scale))
        lines.append(form.format(M=name.capitalize(), v=v, max=_max(scale), n=n))
    if draw(st.booleans()):
        lines.append(f"Overall score: {draw(on_scale(scale))}")
    justification = draw(st.sampled_from(JUSTIFICATIONS))
    return justification + ".\n\n" + "\n".join(lines)


@PROPERTY
@given(data=st.data(), scale=st.sampled_from(SCALES), metric=st.sampled_from(METRICS))
def test_property_a_multi_metric_reply_is_read_for_the_metric_asked(
    data: st.DataObject, scale: Scale, metric: str
) -> None:
    value = data.draw(on_scale(scale))
    text = data.draw(multi_metric_reply(scale, metric, value))
    reading = extract_score(text, scale, labels=(metric,), metric=metric)
    assert (reading.score, reading.reason) == (float(value), "labelled"), (text, reading)


@PROPERTY
@given(data=st.data(), scale=st.sampled_from(SCALES), metric=st.sampled_from(METRICS))
def test_property_other_metrics_lines_are_never_read_for_this_metric(
    data: st.DataObject, scale: Scale, metric: str
) -> None:
    text = data.draw(multi_metric_reply(scale, None, "0", absent=metric))
    _assert_unread(text, scale, labels=(metric,), metric=metric)


@PROPERTY
@given(data=st.data(), scale=st.sampled_from(SCALES), kind=st.sampled_from(list(FORMATS)))
def test_property_a_single_metric_reply_reads_the_same_with_its_metric(
    data: st.DataObject, scale: Scale, kind: str
) -> None:
    """Naming the metric changes nothing unless the reply rates several metrics."""
    value = data.draw(on_scale(scale))
    text = data.draw(surrounded(_fill(data.draw(st.sampled_from(FORMATS[kind])), value, scale)))
    metric = data.draw(st.sampled_from(METRICS))
    assert extract_score(text, scale, labels=(metric,), metric=metric) == extract_score(
        text, scale, labels=(metric,)
    )


# ---------------------------------------------------------------------------------------------------
# Examples, each form and its counter-forms as judges write them


@pytest.mark.parametrize(
    ("text", "scale", "metric", "score", "reason"),
    [
        # 1
        (
            "The summary omits the verdict, resulting in a low relevance score of 2.",
            F,
            None,
            2,
            "verdict_clause",
        ),
        ("Several facts are invented, leading to a score of 1.", F, None, 1, "verdict_clause"),
        (
            "Every sentence reads naturally, thus scoring a perfect fluency rating of 5.",
            F,
            None,
            5,
            "verdict_clause",
        ),
        (
            "It captures all key points, making it a perfect relevance score of 5.",
            F,
            None,
            5,
            "verdict_clause",
        ),
        ("It is good, but not a perfect score of 5.", F, None, None, "no_score"),
        ("It falls just short of a score of 4.", F, None, None, "no_score"),
        # 2
        (
            "The summary is accurate but leaves out the second event; 4 out of 5.",
            F,
            None,
            4,
            "fraction_closing",
        ),
        ("Mostly coherent with one abrupt jump, score of 4.", F, None, 4, "verdict_closing"),
        ("The summary is accurate; 2 out of 5 claims are unsupported, though.", F, None, None, "no_score"),
        # 3
        (
            "The summary is a 2 out of 5 in relevance because it misses the point.",
            F,
            None,
            2,
            "fraction_verb",
        ),
        ("It reads smoothly, making it a 5 out of 5 in terms of fluency.", F, None, 5, "fraction_verb"),
        ("The summary scores a relevance of 3 out of 5.", F, None, 3, "fraction_noun"),
        ("There is a 2 out of 5 chance that a reader is misled.", F, None, None, "no_score"),
        ("3 out of 5 sentences repeat the article.", F, None, None, "no_score"),
        # 4
        (
            "It says nothing about the article's subject, therefore it is irrelevant (1/5).",
            F,
            None,
            1,
            "fraction_closing",
        ),
        ("It leaves out most facts (2/5 claims).", F, None, None, "no_score"),
        # 5
        ("The summary is incoherent, with a score of one.", F, None, 1, "verdict_clause"),
        ("The summary contradicts the article, scoring a one out of five.", F, None, 1, "verdict_verb"),
        ("I give it a score of two.", F, None, 2, "phrase"),
        ("It covers one of the five points.", F, None, None, "no_score"),
        # 6
        ("Coherence: 4/5\nFluency: 3/5\nRelevance: 2/5\nOverall: 3/5", F, "coherence", 4, "labelled"),
        ("Fluency: 3/5\nRelevance: 2/5\nOverall score: 3", F, "coherence", None, "no_score"),
        ("The summary is clear.\nCoherence: 4", F, "coherence", 4, "labelled"),
    ],
)
def test_examples(text: str, scale: Scale, metric: str | None, score: int | None, reason: Reason) -> None:
    labels = (metric,) if metric else ()
    reading = extract_score(text, scale, labels=labels, metric=metric)
    assert (reading.score, reading.reason) == (score, reason), reading


# Real replies of a held-out judge (instructlab/eval's MT-Bench judgments, bench/fetch_held_out_corpus.py;
# Apache-2.0), 1-10: the sentences that carry or deny the verdict.
@pytest.mark.parametrize(
    ("text", "score"),
    [
        ("Overall, the response is helpful, honest, and harmless, and I would rate it a 10.", 10),
        ("The rating for this conversation is 8.", 8),
        ("I rate the response as 1 because the assistant's answer is not helpful in this context.", 1),
        ("The assistant's rating is deservedly a 10.", 10),
        ("The assistant's rating remains at 8, as the response is still largely accurate and helpful.", 8),
        ("The movie reviews provided are rated as 5, 1, and 3, respectively.", None),
        ("Confidence: 9/10", None),
        ("Confidence: 90%", None),
    ],
)
def test_held_out_judge_sentences(text: str, score: int | None) -> None:
    assert extract_score(text, Scale(1, 10, integer=False)).score == score


def test_the_rubric_judge_reads_a_multi_metric_reply_for_its_metric() -> None:
    """The stage passes the metric it asked for (pipeline.judges.rubric.judge.read_score)."""
    from pipeline.judges.rubric.judge import read_score

    reply = "Coherence: 2/5\nSpecificity: 4/5\nAccuracy: 3/5\nOverall score: 3"
    assert (read_score(reply, "specificity").score, read_score(reply, "coherence").score) == (4, 2)
    assert read_score(reply, "completeness").score is None  # not rated: no other metric's line stands in


# Linear time for the new readings, by counting steps as tests/test_scores_fractions.py does.
SHAPES: dict[str, Callable[[int], str]] = {
    "number words": lambda n: "one of the two, scoring a one out of five " * n,
    "pronouns": lambda n: "this one " * (5 * n),
    "closing after commas": lambda n: "it is fine, score of 4; 4 out of 5, " * n,
    "parentheses": lambda n: "(2/5) " * (5 * n),
    "metric lines": lambda n: "Coherence: 4/5\nFluency: 3/5\n" * n,
    "result clauses": lambda n: "resulting in a low relevance score of " * n,
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_new_readings_grow_linearly(shape: str) -> None:
    from tests.test_scores_fractions import _steps

    build = SHAPES[shape]
    extract_score(build(1), T, labels=("coherence",), metric="coherence")

    def run(n: int) -> int:
        return _steps(lambda: extract_score(build(n), T, labels=("coherence",), metric="coherence"))

    small, large = run(100), run(400)
    assert large <= 4 * 1.25 * small, f"{shape}: 4 times the reply took {large / small:.1f} times the steps"
