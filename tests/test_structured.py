"""Structured replies: the schema a model class asks for, validation, re-asks and typed failures,
through a real session over the in-process fake backend."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, Field, field_validator

from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.keys import request_key
from pipeline.llm.structured import (
    RUNAWAY_WHITESPACE,
    Structured,
    StructuredFailure,
    ask_structured,
    schema_for,
    tally,
)
from pipeline.llm.types import CallContext, ChatReply, ChatRequest, Message, Options
from tests.helpers import make_session

CTX = CallContext(stage="judge", item="901", labels={"metric": "coherence"})
ASK = (Message(role="user", content="Judge the answer. Reply as JSON: explanation, then score 1-5."),)


class Verdict(BaseModel):
    """A judge's verdict."""

    explanation: str
    score: int = Field(ge=1, le=5)

    @field_validator("explanation")
    @classmethod
    def _said_something(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the explanation is empty")
        return value


class Titled(BaseModel):
    title: str  # a property named like the keyword schema_for drops
    kind: Literal["a", "b"] = "a"


def test_schema_for_is_deterministic_and_strict() -> None:
    schema = schema_for(Verdict)
    assert schema == schema_for(Verdict) and schema is not schema_for(Verdict)
    assert schema == {
        "type": "object",
        "description": "A judge's verdict.",
        "properties": {
            "explanation": {"type": "string"},
            "score": {"type": "integer", "minimum": 1, "maximum": 5},
        },
        "required": ["explanation", "score"],
        "additionalProperties": False,
    }
    titled = schema_for(Titled)
    assert list(titled["properties"]) == ["title", "kind"] and titled["required"] == ["title", "kind"]
    assert titled["properties"]["kind"] == {"enum": ["a", "b"], "type": "string"}  # default dropped
    model = FakeBackend().identity()
    key = request_key(model, ChatRequest(messages=ASK, format=schema_for(Verdict)))
    assert key == request_key(model, ChatRequest(messages=ASK, format=schema_for(Verdict)))


def test_a_valid_reply_is_a_typed_value(tmp_path: Path) -> None:
    session, fake = make_session(tmp_path, responder=lambda r: '{"explanation": "clear", "score": 4}')
    result = ask_structured(session, ASK, Verdict, Options(), CTX)
    assert isinstance(result, Structured)
    assert result.value == Verdict(explanation="clear", score=4) and result.attempts == 1
    assert fake.calls[0].format == schema_for(Verdict)  # the backend was asked to enforce it
    assert result.keys == (session.calls[0].record.key,) and result.problems == ()


def test_the_fake_decoder_keeps_a_reply_within_the_schema(tmp_path: Path) -> None:
    # The model "wanted" score 9; a constrained decoder cannot write it.
    session, _ = make_session(tmp_path, responder=lambda r: '{"explanation": "clear", "score": 9}')
    result = ask_structured(session, ASK, Verdict, Options(), CTX)
    assert isinstance(result, Structured) and result.value == Verdict(explanation="clear", score=1)


def _first_then(first: str, then: str) -> FakeBackend:
    return FakeBackend(lambda r: then if len(r.messages) > 1 else first)


def test_invalid_then_valid_reasks_once_with_the_error(tmp_path: Path) -> None:
    # Valid for the schema (which cannot say "non-blank"), invalid for the model: re-asked.
    fake = _first_then('{"explanation": " ", "score": 2}', '{"explanation": "now said", "score": 2}')
    session, _ = make_session(tmp_path, backend=fake)
    result = ask_structured(session, ASK, Verdict, Options(), CTX)
    assert isinstance(result, Structured) and result.value.explanation == "now said"
    assert result.attempts == 2 and [p.kind for p in result.problems] == ["invalid"]
    reask = fake.calls[1].messages
    assert reask[:2] == (ASK[0], Message(role="assistant", content='{"explanation": " ", "score": 2}'))
    assert reask[2].role == "user" and "the explanation is empty" in reask[2].content
    assert [c.context.attempt for c in session.calls] == [0, 1]
    assert tally([result]) == {"ok": 1, "invalid": 1}


def test_invalid_twice_is_a_typed_failure_holding_the_text(tmp_path: Path) -> None:
    session, fake = make_session(tmp_path, responder=lambda r: '{"explanation": "", "score": 3}')
    result = ask_structured(session, ASK, Verdict, Options(), CTX)
    assert isinstance(result, StructuredFailure)
    assert result.kind == "invalid" and "the explanation is empty" in result.error
    assert result.text == '{"explanation": "", "score": 3}' and len(fake.calls) == 2
    assert result.keys == tuple(c.record.key for c in session.calls)
    assert tally([result]) == {"failed": 1, "invalid": 2}


def test_a_reply_cut_by_num_predict_is_truncated_and_not_parsed(tmp_path: Path) -> None:
    long = json.dumps({"explanation": "word " * 200, "score": 4})
    session, fake = make_session(tmp_path, responder=lambda r: long)
    result = ask_structured(session, ASK, Verdict, Options(num_predict=20), CTX)
    assert isinstance(result, StructuredFailure) and result.kind == "truncated"
    assert result.text == long[:80] and "cut" in result.error
    assert "not a complete JSON object" in fake.calls[1].messages[-1].content


def test_a_length_stop_is_not_parsed_even_when_the_text_happens_to_parse(tmp_path: Path) -> None:
    cut = ChatReply(text='{"explanation": "ok", "score": 5}', done_reason="length", completion_tokens=9)
    session, _ = make_session(tmp_path, backend=FakeBackend(lambda r: cut))
    result = ask_structured(session, ASK, Verdict, Options(), CTX, max_attempts=1)
    assert isinstance(result, StructuredFailure) and result.kind == "truncated" and result.attempts == 1


def test_whitespace_runaway_is_flagged_and_the_reask_leaves_the_whitespace_out(tmp_path: Path) -> None:
    looping = '{"explanation": "ok",' + "\n" * 300
    replies = {
        1: ChatReply(text=looping, done_reason="length"),
        3: ChatReply(text='{"explanation": "ok", "score": 3}'),
    }
    fake = FakeBackend(lambda r: replies[len(r.messages)])
    session, _ = make_session(tmp_path, backend=fake)
    result = ask_structured(session, ASK, Verdict, Options(), CTX)
    assert isinstance(result, Structured) and result.value.score == 3
    assert [p.kind for p in result.problems] == ["runaway_whitespace"]
    assert fake.calls[1].messages[1].content == '{"explanation": "ok",'
    assert tally([result]) == {"ok": 1, "runaway_whitespace": 1}


def test_a_short_whitespace_run_is_not_a_runaway(tmp_path: Path) -> None:
    pretty = "{\n" + " " * (RUNAWAY_WHITESPACE - 2) + '"explanation": "ok",\n  "score": 2\n}'
    session, _ = make_session(tmp_path, responder=lambda r: pretty)
    assert isinstance(ask_structured(session, ASK, Verdict, Options(), CTX), Structured)


def test_max_attempts_must_allow_one_call(tmp_path: Path) -> None:
    session, _ = make_session(tmp_path)
    with pytest.raises(ValueError, match="at least 1"):
        ask_structured(session, ASK, Verdict, Options(), CTX, max_attempts=0)


def test_field_order_reaches_the_key_through_required() -> None:
    class ScoreFirst(BaseModel):
        score: int = Field(ge=1, le=5)
        explanation: str

    assert schema_for(ScoreFirst)["required"] == ["score", "explanation"]
    model = FakeBackend().identity()
    keys = {
        request_key(model, ChatRequest(messages=ASK, format=schema_for(m))) for m in (Verdict, ScoreFirst)
    }
    assert len(keys) == 2


def test_llama_cpp_python_gets_bounded_integers_as_enums() -> None:
    from pipeline.llm.backends.embedded import enumerate_integer_ranges

    schema = schema_for(Verdict)
    grammar_schema = enumerate_integer_ranges(schema)
    assert grammar_schema["properties"]["score"]["enum"] == [1, 2, 3, 4, 5]
    assert grammar_schema["properties"]["explanation"] == {"type": "string"}
    assert list(grammar_schema["properties"]) == ["explanation", "score"]  # order kept for the grammar
    wide = {"type": "integer", "minimum": 0, "maximum": 10_000}
    assert "enum" not in enumerate_integer_ranges(wide)


def test_the_embedded_grammar_keeps_control_characters_out_of_strings() -> None:
    # llama-cpp-python 0.3's converter writes `char ::= [^"\\] | ...`: a raw newline passes.
    json_schema_to_gbnf = pytest.importorskip("llama_cpp.llama_grammar").json_schema_to_gbnf
    from pipeline.llm.backends.embedded import json_strings_without_control_characters

    loose = json_schema_to_gbnf(json.dumps({"type": "object", "properties": {"e": {"type": "string"}}}))
    fixed = json_strings_without_control_characters(loose)
    char_rule = next(line for line in fixed.splitlines() if line.startswith("char ::="))
    assert char_rule.startswith(r'char ::= [^"\\\x7F\x00-\x1F] |')
