"""The judge score extractor: examples of every format and trap, and properties over generated replies.

The properties are the contract: a verdict in a supported format is read back exactly whatever
surrounds it (rubric echoes and stray numbers included); rubric echoes alone never score; out-of-range
values are refused, never clamped; nothing raises; a score is always on the scale.
"""

from __future__ import annotations

import typing

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pipeline.judges.scores import DEFAULT_SCALE, READ_REASONS, Reason, Scale, ScoreReading, extract_score

ONE_TO_FIVE = Scale(1, 5)
MT_BENCH = Scale(1, 10, integer=False)

# ---------------------------------------------------------------------------------------------------
# Examples


@pytest.mark.parametrize(
    ("text", "score", "reason"),
    [
        # labelled
        ("Score: 4", 4, "labelled"),
        ("Explanation: Clear and consistent.\nScore: 5", 5, "labelled"),
        ("**Score:** 4/5", 4, "labelled"),
        ("**Score: 5**", 5, "labelled"),
        ("Score: **3**", 3, "labelled"),
        ("Score:5/5", 5, "labelled"),
        ("Score: 4 out of 5", 4, "labelled"),
        ("SCORE - 2", 2, "labelled"),
        ("Final score: 4.", 4, "labelled"),
        ("Overall rating: 3", 3, "labelled"),
        ("Rating: [[4]]", 4, "labelled"),
        ("Score: [4]", 4, "labelled"),
        ("Score (1-5): 4", 4, "labelled"),
        ("### Score\n: 2", None, "no_score"),
        ("Score:\n\n4", 4, "labelled"),
        ("Score = 1", 1, "labelled"),
        ("Grade: 3", 3, "labelled"),
        ("Score: 4.0", 4, "labelled"),
        ("score：4", 4, "labelled"),
        # json
        ('{"score": 4, "explanation": "two small slips"}', 4, "json"),
        ('Here you go:\n```json\n{\n  "explanation": "fine",\n  "score": 3\n}\n```', 3, "json"),
        ("{'rating': '5'}", 5, "json"),
        ('{"result": {"final_score": 2}}', 2, "json"),
        # bracketed
        ("I would rate this response as a [[4]].", 4, "bracketed"),
        ("[[5]]", 5, "bracketed"),
        # phrase
        ("I give it a score of 4.", 4, "phrase"),
        ("Overall, the assessment deserves a rating of 3.", 3, "phrase"),
        ("I would rate it 4 out of 5.", 4, "phrase"),
        ("I would rate the assessment as a 2.", 2, "phrase"),
        ("My score is 5.", 5, "phrase"),
        ("I'd give this a 4.", 4, "phrase"),
        ("This would be rated as a 3.", 3, "phrase"),
        # bare number
        ("4", 4, "bare_number"),
        (" 4.\n", 4, "bare_number"),
        ("**3**", 3, "bare_number"),
        ("- 2", 2, "bare_number"),
        ("4/5", 4, "bare_number"),
        # nothing readable
        ("", None, "empty"),
        ("  \n\t", None, "empty"),
        ("The assessment is good.", None, "no_score"),
        ("four", None, "no_score"),
    ],
)
def test_formats(text: str, score: int | None, reason: Reason) -> None:
    reading = extract_score(text)
    assert (reading.score, reading.reason) == (score, reason)
    if score is not None:
        assert reading.matched is not None and str(score) in reading.matched


@pytest.mark.parametrize(
    ("text", "score", "reason"),
    [
        # real-looking SmolLM2-135M replies to the verbatim prompt
        ("Explanation: The assessment has 3-4 mistakes.\nScore: 3", 3, "labelled"),
        (
            "Explanation: [Your rating, as text]\nScore: [your score, as a number between 1 and 5]",
            None,
            "template_echo",
        ),
        ("Score: [your score, as a number between 1 and 5]", None, "template_echo"),
        ("Score: [your score, as a number between 1 and 5]\nScore: 4", 4, "labelled"),
        (
            " - score of 5 : 0 mistakes\n - score of 4 : 1-2 mistakes\n - score of 3 : 3-4 mistakes",
            None,
            "no_score",
        ),
        (
            "Score from 1-5 solely based on the following criteria:\n - score of 4 : 1-2 mistakes",
            None,
            "no_score",
        ),
        ("Explanation: The assessment misses 2 PHQ-8 symptoms over 2 weeks.\nScore: 4", 4, "labelled"),
        ("Explanation: good.\nScore: 4 - 1-2 mistakes", 4, "labelled"),
        ("Explanation: good.\nScore: 5 - 0 mistakes", 5, "labelled"),
        ("Explanation: poor.\nScore: 1 - 7 or more mistakes", 1, "labelled"),
        ("Score: 4 (1-2 mistakes)", 4, "labelled"),
        ("Score: 4\n\n - score of 5 : 0 mistakes\n - score of 4 : 1-2 mistakes", 4, "labelled"),
        ("Score: 5 : 0 mistakes\nScore: 4 : 1-2 mistakes\nScore: 1 : 7 or more mistakes", None, "no_score"),
        ("Score: 2 mistakes", None, "no_score"),
        ("Score: 1-2 mistakes", None, "ambiguous"),
        ("Score: 3-4", None, "ambiguous"),
        ("Score: 1-5", None, "ambiguous"),
        ("Score: 3 or 4", None, "ambiguous"),
        ("Score: 1 - 2 mistakes", None, "ambiguous"),
        ("Score:\n1. The assessment mentions sleep.", None, "no_score"),
        ("The rubric gives a score of 5 for 0 mistakes.", None, "no_score"),
        ("A score of 5 means 0 mistakes.", None, "no_score"),
        ("Coherence (1–5): Is the response logically consistent?", None, "no_score"),
        ("Explanation: mostly right. I give it a score of 4 : 1-2 mistakes", None, "no_score"),
        ("The patient gets 2 weeks of therapy.", None, "no_score"),
        ("sub-score: 3", None, "no_score"),
        ("Score: 4th", None, "no_score"),
        ("dp[[0]] = 1", None, "no_score"),
        ("Score: 80%", None, "no_score"),
    ],
)
def test_messy_replies(text: str, score: int | None, reason: Reason) -> None:
    assert (extract_score(text).score, extract_score(text).reason) == (score, reason)


@pytest.mark.parametrize(
    ("text", "scale", "score", "reason"),
    [
        ("Score: 7", ONE_TO_FIVE, None, "out_of_range"),
        ("Score: 0", ONE_TO_FIVE, None, "out_of_range"),
        ("Score: -1", ONE_TO_FIVE, None, "out_of_range"),
        ("Score: 6/5", ONE_TO_FIVE, None, "out_of_range"),
        ("7", ONE_TO_FIVE, None, "out_of_range"),
        ("Score: 4/10", ONE_TO_FIVE, None, "scale_mismatch"),
        ("Score: 4 out of 10", ONE_TO_FIVE, None, "scale_mismatch"),
        ("Score: 4/5", Scale(1, 10), None, "scale_mismatch"),
        ("Score: 4.5", ONE_TO_FIVE, None, "non_integer"),
        ("Rating: [[8.5]]", MT_BENCH, 8.5, "labelled"),
        ("Rating: [[8.5]]", Scale(1, 10), None, "non_integer"),
        ("Rating: [[10]]", MT_BENCH, 10, "labelled"),
        ("Rating: [[10]]", ONE_TO_FIVE, None, "out_of_range"),
        ("Groundedness is absent.\nScore: 0", Scale(0, 1), 0, "labelled"),
        ("Score: 0.5", Scale(0, 1, integer=False), 0.5, "labelled"),
        ("Score: 3/3", Scale(1, 3), 3, "labelled"),
        ("Score: 100", Scale(0, 100), 100, "labelled"),
    ],
)
def test_scale(text: str, scale: Scale, score: float | None, reason: Reason) -> None:
    reading = extract_score(text, scale)
    assert (reading.score, reading.reason) == (score, reason)


def test_integral_scores_are_ints_and_others_floats() -> None:
    assert type(extract_score("Score: 4").score) is int
    assert type(extract_score("Score: 4.0").score) is int
    assert type(extract_score("Score: 8.5", MT_BENCH).score) is float


@pytest.mark.parametrize(
    ("text", "score", "reason"),
    [
        # the last explicit verdict wins (Inspect AI: the last GRADE)...
        ("Score: 3\nOn reflection the dates are wrong.\nScore: 5", 5, "labelled"),
        ("Score: 5\nScore: 2", 2, "labelled"),
        ('{"score": 2}\nScore: 4', 4, "labelled"),
        ('Score: 4\n{"score": 2}', 2, "json"),
        ("Rating: [[3]] ... actually [[4]]", 4, "bracketed"),
        # ...even when it is unusable: no falling back to an earlier one
        ("Score: 4\nScore: 7", None, "out_of_range"),
        ("Score: 4\nScore: 3-4", None, "ambiguous"),
        ("Score: 7\nScore: 4", 4, "labelled"),
        # explicit verdicts beat phrases, wherever they are
        ("Score: 4\nI would give it a score of 2 if it had more mistakes.", 4, "labelled"),
        ("I give it a score of 2.\nScore: 4", 4, "labelled"),
        # phrases: the last one
        ("I would rate it a 2. No, I give it a score of 3.", 3, "phrase"),
    ],
)
def test_precedence(text: str, score: int | None, reason: Reason) -> None:
    reading = extract_score(text)
    assert (reading.score, reading.reason) == (score, reason)


def test_extra_labels() -> None:
    assert extract_score("Coherence: 2", Scale(1, 3)).reason == "no_score"
    reading = extract_score("- Coherence: 2", Scale(1, 3), labels=["Coherence"])
    assert (reading.score, reading.reason) == (2, "labelled")
    assert extract_score('{"coherence": 3}', Scale(1, 3), labels=("coherence",)).score == 3


def test_scale_validation() -> None:
    with pytest.raises(ValueError):
        Scale(5, 1)
    with pytest.raises(ValueError):
        Scale(1, 1)
    with pytest.raises(ValueError):
        Scale(0.5, 5)
    with pytest.raises(ValueError):
        Scale(1, float("inf"), integer=False)
    assert Scale(0.5, 5, integer=False).max == 5
    assert Scale(1, 5) == DEFAULT_SCALE


# ---------------------------------------------------------------------------------------------------
# Properties

SCALES = [
    Scale(1, 5),
    Scale(1, 3),
    Scale(0, 1),
    Scale(1, 10),
    Scale(0, 100),
    Scale(1, 10, integer=False),
    Scale(0, 1, integer=False),
]

# {v}: the value as written; {max}/{min}: the scale's bounds.
LABELLED = [
    "Score: {v}",
    "score: {v}",
    "SCORE: {v}",
    "**Score:** {v}",
    "**Score: {v}**",
    "**Score**: {v}",
    "__Score__: {v}/{max}",
    "*Rating*: [[{v}]]",
    "Score: **{v}**",
    "Score:{v}/{max}",
    "Score: {v}/{max}",
    "Score: {v} out of {max}",
    "Rating: [[{v}]]",
    "SCORE - {v}",
    "Final score: {v}.",
    "Score = {v}",
    "Overall rating: {v}",
    "### Score: {v}",
    "Score ({min}-{max}): {v}",
    "Score:\n\n{v}\n",
    "Grade: {v}",
    "Score: [{v}]",
    "Score: {v} - 1-2 mistakes",
    "Score: {v} (see the explanation above)",
]
JSON = [
    '{{"score": {v}, "explanation": "fine"}}',
    '```json\n{{\n  "explanation": "3-4 mistakes, PHQ-8",\n  "score": {v}\n}}\n```',
    "{{'rating': '{v}'}}",
    '{{"score": "{v}/{max}"}}',
]
BRACKETED = ["[[{v}]]", "[[{v}/{max}]]", "Therefore I would rate this response as a [[{v}]]."]
PHRASE = [
    "I give it a score of {v}.",
    "I would rate it {v} out of {max}.",
    "My score is {v}.",
    "I'd give this a {v}.",
    "The assessment deserves a rating of {v}.",
    "This would be rated as a {v}.",
    "I rate the assessment as a {v}.",
]
# The prose grammar. A comma or a sentence before each verdict, as a judge writes it: a negation such as
# "no" or "not" just before the verb makes it no verdict ("does not deserve a 5").
VERDICT_VERB = [
    "Overall, I would score it a {v}.",
    "All in all, I score it {v} out of {max}.",
    "In short, it scores a {v}.",
    "Clear and complete, scoring {v} out of {max} for relevance.",
    "Overall, I'd rate this summary {v}.",
    "On balance, the summary deserves a {v}.",
]
VERDICT_CLAUSE = [
    "The summary is clear, resulting in a score of {v}.",
    "It covers every symptom, earning a score of {v}.",
    "Some quotes are missing, which results in an overall score of {v}.",
    "Taken together, it warrants a coherence rating of {v} out of {max}.",
]
VERDICT_NAMED = [
    "All told, a coherence rating of {v}.",
    "My verdict, then: an overall score of {v}.",
    "In sum, my final grade of {v}.",
    "Weighing it all, an accuracy score of {v} out of {max}.",
    "Fluent throughout, so a fluency score of {v} because nothing jars.",
]
BARE = ["{v}", "{v}.", "**{v}**", "  {v}\n", "{v}/{max}", "- {v}"]
FORMATS: dict[str, list[str]] = {
    "labelled": LABELLED,
    "json": JSON,
    "bracketed": BRACKETED,
    "phrase": PHRASE,
    "verdict_verb": VERDICT_VERB,
    "verdict_clause": VERDICT_CLAUSE,
    "verdict_named": VERDICT_NAMED,
    "bare_number": BARE,
}
GRAMMAR = ("verdict_verb", "verdict_clause", "verdict_named")
EXPLICIT = ("labelled", "json", "bracketed")

RUBRIC = [
    (5, "0 mistakes"),
    (4, "1-2 mistakes"),
    (3, "3-4 mistakes"),
    (2, "5-6 mistakes"),
    (1, "7 or more mistakes"),
]
RUBRIC_LINE = [
    " - score of {n} : {d}",
    "- score of {n}: {d}",
    "score of {n} : {d}",
    "* Score of {n} : {d}",
    "- Score: {n} : {d}",
    "Score - {n} : {d}",
    "score of {n} = {d}",
    "{n} : {d}",
    "a score of {n} means {d}",
    "score of {n} for {d}",
    "Score: {n}: {d}",
]
# Text a judge plausibly writes that carries numbers and prompt echoes but no verdict.
DISTRACTORS = [
    "The assessment has 3-4 mistakes.",
    "It misses 2 PHQ-8 symptoms.",
    "Symptoms lasted 2 weeks.",
    "Score from 1-5 solely based on the following criteria:",
    "Format your response as:",
    "Explanation: [Your rating, as text]",
    "Score: [your score, as a number between 1 and 5]",
    "Coherence (1–5): Is the response logically consistent?",
    "Accuracy (1–5): Are the signs/symptoms aligned with DSM-5 or PHQ-8?",
    "The patient scored 14 on the PHQ-8.",
    "Interest: 2 out of 3 days.",
    "See item 7.",
    "In 2019, 5 of the 8 items were endorsed.",
    "1. Sleep\n2. Mood\n3. Appetite",
    "It scores 1-5 on average.",
    "The rating scale is 1 to 5.",
    "---",
    "(a) 1-2 (b) 3-4",
    "A score of 5 requires zero mistakes.",
    "Only a score of 1 is worse.",
    "Rated 4 stars by 12 users.",
    # numbers in prose and hypothetical verdicts, for the prose grammar
    "It covers 3 of the 5 sections.",
    "The interview lasted 45 minutes.",
    "A perfect score of 5 would need every symptom.",
    "To earn a score of 5 it would need quotes.",
    "It does not deserve a 5.",
    "The summary would score 4 if it quoted the patient.",
    "I would rate it between 3 and 4.",
    "Rate it on a 1-5 scale.",
    "Give it a score of N, where N is a number.",
    "The patient got a 2-hour session.",
]
WORD_TEXT = (
    "the assessment patient transcript mentions sleep mood appetite and but however clearly "
    "coherent accurate vague specific depressed symptoms duration frequency Explanation "
    "summary overall reasonable missing quote interview reports feeling tired low energy"
)
WORDS = WORD_TEXT.split()
noise_letters = st.text(alphabet="abcdefghijklmnopqrstuvwxyz ABCDEFGHIJ,.!?'\n", max_size=40)
noise_piece = st.one_of(st.sampled_from(WORDS), st.sampled_from(DISTRACTORS), noise_letters)
rubric_lines = st.lists(st.sampled_from(RUBRIC), unique=True).flatmap(st.permutations)


@st.composite
def noise(draw: st.DrawFn, rubric: bool = True) -> str:
    """Text with no verdict in it: words, letters, distractor sentences and (optionally) rubric lines."""
    parts = draw(st.lists(noise_piece, max_size=8))
    if rubric:
        for n, d in draw(rubric_lines):
            line = draw(st.sampled_from(RUBRIC_LINE)).format(n=n, d=d)
            parts.insert(draw(st.integers(0, len(parts))), line)
    return "\n".join(" ".join(parts[i : i + 3]) for i in range(0, len(parts), 3))


@st.composite
def on_scale(draw: st.DrawFn, scale: Scale) -> str:
    """A value on the scale, written as a judge would: '4', '0.5', '8.25'."""
    if scale.integer:
        return str(draw(st.integers(int(scale.min), int(scale.max))))
    hundredths = draw(st.integers(round(scale.min * 100), round(scale.max * 100)))
    return f"{hundredths / 100:.2f}".rstrip("0").rstrip(".")


def _fill(template: str, value: str, scale: Scale) -> str:
    return template.format(v=value, max=_num(scale.max), min=_num(scale.min))


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _read_back(reading: ScoreReading, value: str, kind: str) -> None:
    assert reading.reason == kind, reading
    assert reading.score == float(value), reading
    assert isinstance(reading.score, int) == float(value).is_integer()
    assert reading.matched is not None and value in reading.matched


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    scale=st.sampled_from(SCALES),
    kind=st.sampled_from(list(FORMATS)),
    before=st.sampled_from(["\n", "\n\n", ". ", " "]),
    after=st.sampled_from(["\n", "\n\n", ". ", "\n---\n"]),
)
def test_property_verdict_in_any_surroundings_is_read_exactly(
    data: st.DataObject, scale: Scale, kind: str, before: str, after: str
) -> None:
    """(1) Any on-scale value in any supported format, between verdict-free text (rubric echoes, other
    numbers, the template echoed), is read back exactly, with the format as the reason."""
    value = data.draw(on_scale(scale))
    verdict = _fill(data.draw(st.sampled_from(FORMATS[kind])), value, scale)
    if kind == "bare_number":
        text = verdict  # a bare number is only a verdict when it is the whole reply
    else:
        prefix, suffix = data.draw(noise()), data.draw(noise())
        text = (prefix + before if prefix else "") + verdict + (after + suffix if suffix else "")
    _read_back(extract_score(text, scale), value, kind)


@settings(max_examples=300, deadline=None)
@given(
    data=st.data(),
    scale=st.sampled_from(SCALES),
    first_kind=st.sampled_from([*EXPLICIT, "phrase"]),
    last_kind=st.sampled_from(EXPLICIT),
)
def test_property_last_explicit_verdict_wins(
    data: st.DataObject, scale: Scale, first_kind: str, last_kind: str
) -> None:
    """(1b) An earlier verdict, on the scale or not, never overrides the last explicit one."""
    earlier = _fill(
        data.draw(st.sampled_from(FORMATS[first_kind])), str(data.draw(st.integers(-20, 120))), scale
    )
    value = data.draw(on_scale(scale))
    last = _fill(data.draw(st.sampled_from(FORMATS[last_kind])), value, scale)
    text = "\n".join([data.draw(noise()), earlier, data.draw(noise()), last, data.draw(noise())])
    _read_back(extract_score(text, scale), value, last_kind)


@settings(max_examples=400, deadline=None)
@given(text=noise(rubric=True), case=st.sampled_from([str, str.lower, str.upper, str.title]))
def test_property_rubric_echo_never_scores(text: str, case: typing.Callable[[str], str]) -> None:
    """(2) Any subset of the rubric lines, in any order and phrasing, with noise: never a score."""
    for scale in (ONE_TO_FIVE, Scale(0, 10), MT_BENCH):
        reading = extract_score(case(text), scale)
        assert reading.score is None, reading


@settings(max_examples=400, deadline=None)
@given(
    data=st.data(),
    scale=st.sampled_from([Scale(1, 3), Scale(0, 1), Scale(1, 5), Scale(1, 10)]),
    kind=st.sampled_from(list(FORMATS)),
    wrapped=st.booleans(),
)
def test_property_out_of_range_never_scores(
    data: st.DataObject, scale: Scale, kind: str, wrapped: bool
) -> None:
    """(3) A value off the scale (below, above, negative, fractional) is refused, never clamped."""
    low, high = int(scale.min), int(scale.max)
    integer = st.one_of(st.integers(-1000, low - 1), st.integers(high + 1, 1000))
    fraction = st.one_of(st.floats(-1000, low - 0.01), st.floats(high + 0.01, 1000)).map(lambda x: f"{x:.2f}")
    value = str(data.draw(st.one_of(integer, fraction)))
    text = _fill(data.draw(st.sampled_from(FORMATS[kind])), value, scale)
    if wrapped and kind != "bare_number":
        text = data.draw(noise()) + "\n" + text + "\n" + data.draw(noise())
    reading = extract_score(text, scale)
    assert (reading.score, reading.reason) == (None, "out_of_range"), (text, reading)


@settings(max_examples=300, deadline=None)
@given(
    data=st.data(),
    scale=st.sampled_from(SCALES),
    template=st.sampled_from(
        [
            "Score: {a}-{b}",
            "Score: {a} - {b}",
            "Score: {a} or {b}",
            "Score: {a} to {b}",
            "Rating: [[{a}]] or [[{b}]]",
        ]
    ),
)
def test_property_range_or_choice_never_scores(data: st.DataObject, scale: Scale, template: str) -> None:
    """(3b) A verdict that is a range or a choice between two values is ambiguous, whatever the values."""
    a = data.draw(on_scale(scale))
    b = data.draw(on_scale(scale).filter(lambda b: float(b) > float(a)))
    text = data.draw(noise()) + "\n" + template.format(a=a, b=b) + "\n" + data.draw(noise())
    reading = extract_score(text, scale)
    assert (reading.score, reading.reason) == (None, "ambiguous"), (text, reading)


@settings(max_examples=300, deadline=None)
@given(
    data=st.data(),
    scale=st.sampled_from(SCALES),
    kind=st.sampled_from(list(FORMATS)),
    denominator=st.integers(1, 1000),
)
def test_property_wrong_denominator_never_scores(
    data: st.DataObject, scale: Scale, kind: str, denominator: int
) -> None:
    """(3c) "4/10" on a 1-5 scale is not a 1-5 score: any denominator but the scale's max is refused."""
    assume(denominator != scale.max)
    value = data.draw(on_scale(scale))
    templates = [t for t in FORMATS[kind] if "{max}" in t and "({min}-{max})" not in t]
    text = data.draw(st.sampled_from(templates)).format(v=value, max=denominator)
    reading = extract_score(text, scale)
    assert (reading.score, reading.reason) == (None, "scale_mismatch"), (text, reading)


scales = st.one_of(
    st.sampled_from(SCALES),
    st.tuples(st.integers(-50, 50), st.integers(1, 50), st.booleans()).map(
        lambda t: Scale(t[0], t[0] + t[1], integer=t[2])
    ),
)
# Verdict-shaped text with arbitrary numbers, so that the properties below see many reads too.
verdictish = st.lists(
    st.one_of(
        st.builds(
            _fill,
            st.sampled_from([t for f in FORMATS.values() for t in f]),
            st.one_of(st.integers(-5, 120).map(str), st.floats(-5, 120).map(lambda x: f"{x:.1f}")),
            st.sampled_from(SCALES),
        ),
        noise_piece,
        st.text(max_size=20),
    ),
    max_size=6,
).map(lambda parts: "\n".join(parts))


@settings(max_examples=500, deadline=None)
@given(text=st.one_of(st.text(), verdictish), scale=scales, labels=st.lists(st.text(max_size=8), max_size=2))
def test_property_never_raises(text: str, scale: Scale, labels: list[str]) -> None:
    """(4) Arbitrary text, scale and labels: a ScoreReading, consistent with itself, never an exception."""
    reading = extract_score(text, scale, labels=labels)
    assert isinstance(reading, ScoreReading)
    assert reading.reason in typing.get_args(Reason)
    assert (reading.score is not None) == (reading.reason in READ_REASONS)
    assert reading.matched is None or reading.matched in text
    assert (reading.reason == "empty") == (not text.strip())


@settings(max_examples=500, deadline=None)
@given(text=st.one_of(st.text(), verdictish), scale=scales)
def test_property_score_is_on_the_scale(text: str, scale: Scale) -> None:
    """(5) A score is within [min, max] (and integral on an integer scale) or None."""
    score = extract_score(text, scale).score
    if score is None:
        return
    assert scale.min <= score <= scale.max
    if scale.integer:
        assert isinstance(score, int)
