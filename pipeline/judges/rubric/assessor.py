"""The qualitative assessor: ask, validate the XML sections, re-ask with the problem, record a failure.

A reply is valid when every required section is present and says something (an HTML comment
echoed from the prompt's template does not count; "not assessed in interview" does). A reply that
is still invalid after the bounded re-asks is recorded as such, with its text: nothing is filled in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, StringConstraints, create_model

from pipeline.judges.rubric.prompts import (
    ASSESS_PROMPT,
    DATA_DELIMITED,
    JSON_ASSESS_FORMAT,
    RETRY_PROMPT,
    with_speakers,
)
from pipeline.judges.rubric.results import Assessment
from pipeline.judges.rubric.settings import AssessSettings
from pipeline.judges.unicode_age import checked_as_unicode_14
from pipeline.llm.structured import StructuredFailure, ask_structured
from pipeline.llm.types import CallContext, ChatRequest, Message, Options

if TYPE_CHECKING:  # named only: the report imports this module without a session or the data
    from pipeline.data.transcripts import Transcript
    from pipeline.llm.session import LLMSession

REQUIRED_SECTIONS = ("assessment", "PHQ8_symptoms", "social_factors", "biological_factors", "risk_factors")
_COMMENT = re.compile(r"<!--.*?(-->|$)", re.S)
_WORD = re.compile(r"[^\W\d_]{2,}")
_QUOTE = re.compile(r"[\"“]([^\"”\n]{8,})[\"”]")


@dataclass(frozen=True)
class Validation:
    sections: dict[str, str] | None
    problem: str | None


def _section(text: str, tag: str) -> str | None:
    match = re.search(rf"<{tag}\s*>(.*?)</{tag}\s*>", text, re.S | re.I)
    return None if match is None else match.group(1)


def sections_problem(kind: str, tags: list[str]) -> str:
    return f"{kind} section(s) " + ", ".join(f"<{t}>" for t in tags)


def quotes_problem(unverified: tuple[str, ...]) -> str:
    shown = "; ".join(f'"{q}"' for q in unverified[:3])
    return f"{len(unverified)} quote(s) do not occur in the transcript: {shown}"


def validate_assessment(text: str) -> Validation:
    sections: dict[str, str] = {}
    missing, empty = [], []
    for tag in REQUIRED_SECTIONS:
        body = _section(text, tag)
        if body is None:
            missing.append(tag)
            continue
        content = _COMMENT.sub("", body)
        content = re.sub(r"</?exact_quotes\s*>", "", content, flags=re.I).strip()
        if not content:
            empty.append(tag)
        sections[tag] = body.strip()
    problems = []
    if missing:
        problems.append(sections_problem("missing", missing))
    if empty:
        problems.append(sections_problem("empty", empty))
    if problems:
        return Validation(None, "; ".join(problems))
    return Validation(sections, None)


# A run of characters that are neither word characters nor apostrophes: punctuation and
# whitespace alike, which the check reads as one space.
_NOT_WORD = "[^\\w']+"


def _normalise(text: str) -> str:
    """Lower case, each run of punctuation and whitespace one space: in one pass, the same text as
    punctuation made spaces and then whitespace runs collapsed (tests/test_quote_check.py)."""
    return re.sub(_NOT_WORD, " ", text.lower()).strip()


def _quoted_in(quote: str, lowered: str) -> bool:
    """Whether the normalised quote occurs in the normalised transcript, found in the transcript
    lower-cased (`lowered`) with each space of the quote standing for a run of punctuation and
    whitespace: normalising a 20 kB transcript took about 0.7 ms per assessment attempt (issue 33)."""
    words = _normalise(quote).split(" ")
    return re.search(_NOT_WORD.join(map(re.escape, words)), lowered) is not None


def unverified_quotes(sections: dict[str, str], transcript: str) -> tuple[str, ...]:
    quotes = [q for body in sections.values() for q in _QUOTE.findall(body)]
    if not quotes:
        return ()
    lowered = checked_as_unicode_14(transcript).lower()  # alike on every Python (judges.unicode_age)
    return tuple(q for q in quotes if not _quoted_in(checked_as_unicode_14(q), lowered))


def transcript_block(transcript: Transcript, settings: AssessSettings) -> str:
    text = transcript.text
    return DATA_DELIMITED.format(transcript=text) if settings.delimit_transcript else text


def ask_for_assessment(
    session: LLMSession,
    transcript: Transcript,
    first_messages: tuple[Message, ...],
    settings: AssessSettings,
    options: Options,
    context: CallContext,
) -> Assessment:
    """Ask, then re-ask with the validation problem, up to settings.max_attempts calls in all."""
    messages = first_messages
    keys: list[str] = []
    options = options.model_copy(update={"num_predict": settings.num_predict})
    text, validation = "", Validation(None, "no attempt")
    unverified: tuple[str, ...] = ()
    for attempt in range(settings.max_attempts):
        call = session.chat(ChatRequest(messages=messages, options=options), context.at(attempt=attempt))
        keys.append(call.record.key)
        text = call.record.reply.text
        if (refused := call.record.reply.too_long) is not None:
            validation = Validation(None, f"too_long: {refused}")
            break  # a re-ask would be longer still
        validation = validate_assessment(text)
        unverified = ()
        if validation.sections is not None and settings.verify_quotes:
            unverified = unverified_quotes(validation.sections, transcript.text)
            if unverified:
                validation = Validation(validation.sections, quotes_problem(unverified))
        if validation.problem is None:
            break
        messages = (
            *messages,
            Message(role="assistant", content=text),
            Message(role="user", content=RETRY_PROMPT.format(problem=validation.problem)),
        )
    return Assessment(
        item=transcript.item_id,
        text=text,
        sections=validation.sections if validation.problem is None else None,
        valid=validation.problem is None,
        problem=validation.problem,
        call_keys=tuple(keys),
        unverified_quotes=unverified,
    )


@lru_cache(maxsize=8)
def sections_model(max_chars: int | None) -> type[BaseModel]:
    """The assessment as a JSON object: the paper's five sections, each a non-empty text."""
    text = Annotated[str, StringConstraints(min_length=1, max_length=max_chars)]
    fields: dict[str, Any] = {tag: (text, ...) for tag in REQUIRED_SECTIONS}
    return create_model("AssessmentSections", **fields)


def as_xml(sections: dict[str, str]) -> str:
    """The sections as the paper's XML reply, which the judge prompt and the report expect."""
    return "\n\n".join(f"<{tag}>\n{sections[tag]}\n</{tag}>" for tag in REQUIRED_SECTIONS)


def with_json_format(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    last = messages[-1]
    return (*messages[:-1], last.model_copy(update={"content": last.content + JSON_ASSESS_FORMAT}))


def ask_for_json_assessment(
    session: LLMSession,
    transcript: Transcript,
    first_messages: tuple[Message, ...],
    settings: AssessSettings,
    options: Options,
    context: CallContext,
) -> Assessment:
    """assess.output = json: the sections under the backend's schema; a reply that still fails
    after the bounded re-asks is recorded invalid with its text, nothing filled in."""
    options = options.model_copy(update={"num_predict": settings.num_predict})
    result = ask_structured(
        session,
        with_json_format(first_messages),
        sections_model(settings.section_chars),
        options,
        context,
        max_attempts=settings.max_attempts,
    )
    if isinstance(result, StructuredFailure):
        return Assessment(
            item=transcript.item_id,
            text=result.text,
            sections=None,
            valid=False,
            problem=f"{result.kind.replace('_', ' ')}: {result.error}",
            call_keys=result.keys,
        )
    sections = {tag: str(getattr(result.value, tag)).strip() for tag in REQUIRED_SECTIONS}
    # A grammar can force a string but not a meaning: "..." or "-" says nothing.
    empty = [tag for tag, body in sections.items() if not _WORD.search(checked_as_unicode_14(body))]
    unverified = unverified_quotes(sections, transcript.text) if settings.verify_quotes else ()
    problem = None
    if empty:
        problem = sections_problem("empty", empty)
    elif unverified:
        problem = quotes_problem(unverified)
    return Assessment(
        item=transcript.item_id,
        text=as_xml(sections),  # the reply as JSON is in the recordings
        sections=sections if problem is None else None,
        valid=problem is None,
        problem=problem,
        call_keys=result.keys,
        unverified_quotes=unverified,
    )


def ask(
    session: LLMSession,
    transcript: Transcript,
    first_messages: tuple[Message, ...],
    settings: AssessSettings,
    options: Options,
    context: CallContext,
) -> Assessment:
    """An assessment in the protocol assess.output names (the first ask and every regeneration)."""
    how = ask_for_json_assessment if settings.output == "json" else ask_for_assessment
    return how(session, transcript, first_messages, settings, options, context)


def assess(
    session: LLMSession,
    transcript: Transcript,
    settings: AssessSettings,
    options: Options,
    stage: str = "assess",
) -> Assessment:
    template = with_speakers(ASSESS_PROMPT, transcript.interviewer, transcript.participant)
    prompt = template.format(transcript=transcript_block(transcript, settings))
    context = CallContext(stage=stage, item=transcript.item_id, step=0, labels={"role": "assess"})
    return ask(session, transcript, (Message(role="user", content=prompt),), settings, options, context)
