"""A lone surrogate (issue 28): the escape "\\ud800" stands for half a character, which Python's json
module and PyYAML's own loader let into a str, and which no UTF-8 file can hold. Written into a
recording or the cache it broke the write (or, as WTF-8, every later read); it could not even be
hashed into a key. Every way in refuses it where it enters: a data file or params.yaml with the
file, the line and the fix; a backend's reply as a failed call, retried, counted and stored nowhere.
The writers refuse it too (the last line of defence), and the terminal shows it as an escape."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tenacity import wait_none

from pipeline.data.listening_requests import load_requests
from pipeline.data.rag_rows import load_rag_rows
from pipeline.data.summeval import load_summeval
from pipeline.errors import ConfigError, InputError, UnreadableReplyError, UnwritableTextError
from pipeline.experiments.params import load_params
from pipeline.experiments.rag.judge_evaluate import read_answer
from pipeline.llm.backends.ollama import OllamaBackend
from pipeline.llm.backends.openai_compat import OpenAICompatBackend, completion_reply
from pipeline.llm.bounds import _surrogate_walk, surrogate_problem
from pipeline.llm.files import atomic_write
from pipeline.llm.records import CallRecord
from pipeline.llm.terminal import shown
from pipeline.llm.types import CallContext, ChatReply, ModelIdentity
from pipeline.testing.fake_ollama import FakeOllama
from pipeline.testing.fake_openai import FakeOpenAI
from pipeline.tools.batch.runners import batch_line
from tests.conftest import ROOT
from tests.helpers import request
from tests.served import KINDS, assert_tried_and_kept_nowhere, backend_of, session, settings

HALF = "\ud800"


def test_the_check_finds_a_half_anywhere_in_a_parsed_value_and_passes_whole_characters() -> None:
    assert surrogate_problem({"a": ["ok", {"b": "x" + HALF}]}) is not None
    assert "a[1].b" in (surrogate_problem({"a": ["ok", {"b": "x" + HALF}]}) or "")
    assert surrogate_problem({"\udc00": 1}) is not None  # a key too
    assert surrogate_problem(["\U0001f600 é \u2028", {"k": 1.5, "n": None}]) is None


_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=4)
_LEAVES = st.none() | st.booleans() | st.integers() | st.floats() | _TEXT | st.binary(max_size=2)
_KEYS = _TEXT | st.integers(-(2**70), 2**70) | st.booleans()


@given(
    st.recursive(
        _LEAVES,
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.lists(inner, max_size=3).map(tuple)
            | st.dictionaries(_KEYS, inner, max_size=3)
            | st.frozensets(_TEXT, max_size=2)
        ),
        max_leaves=12,
    )
)
def test_the_check_in_c_says_what_the_walk_says(value: object) -> None:
    """surrogate_problem asks orjson first (a value it writes holds no half) and walks only what it
    refuses: the same answer as the walk alone, for every value, including what orjson cannot write
    (bytes, sets, tuples as keys, integers past 64 bits)."""
    assert surrogate_problem(value) == _surrogate_walk(value)


# -- data files: the file, the line, the fix ---------------------------------------------------------


def test_a_summeval_line_holding_a_half_is_refused_naming_its_line(tmp_path: Path) -> None:
    lines = (ROOT / "data" / "summeval-demo" / "summeval-demo.jsonl").read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[1])
    row["decoded"] += HALF
    lines[1] = json.dumps(row)  # ensure_ascii: written as the escape \ud800, as a JSON file would
    path = tmp_path / "summeval.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"summeval.jsonl:2: a lone surrogate .* in decoded.*Fix: write the"):
        load_summeval(path)


def test_a_rag_row_holding_a_half_is_refused_naming_its_line(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    good = {"id": "q1", "question": "Why?", "answer": "Because."}
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "id": "q2", "answer": "Be" + HALF}) + "\n")
    with pytest.raises(InputError, match=r"rows.jsonl:2: the escape \\ud800 alone stands for half a char"):
        load_rag_rows(path)


def test_a_rag_answer_file_holding_a_half_is_refused_naming_its_line(tmp_path: Path) -> None:
    path = tmp_path / "answer.json"
    path.write_text('{\n  "answer": "fine \\ud83d\\ude00",\n  "reasoning": "half \\udc00"\n}\n')
    with pytest.raises(InputError, match=r"answer.json:3: a lone surrogate \(\\udc00.* in reasoning"):
        read_answer(path)
    path.write_text('{"answer": "fine \\ud83d\\ude00"}')  # a pair is one character: read
    assert read_answer(path).answer == "fine \U0001f600"


def test_a_requests_file_holding_a_half_is_refused_naming_its_line(tmp_path: Path) -> None:
    path = tmp_path / "requests.yaml"
    path.write_text('requests:\n  - id: r1\n    text: "calm \\ud800 music"\n')
    with pytest.raises(InputError, match=r"requests.yaml:3: not valid YAML \(a lone surrogate"):
        load_requests(path)


def test_params_yaml_holding_a_half_is_refused_naming_its_line(tmp_path: Path) -> None:
    """PyYAML's own loader (yaml.safe_load) reads the escape as half a character; libyaml refuses it."""
    text = (ROOT / "params.yaml").read_text(encoding="utf-8")
    model = "  model: SmolLM2-135M-Instruct.Q4_1"
    assert model in text
    path = tmp_path / "params.yaml"
    path.write_text(text.replace(model, '  model: "SmolLM2\\ud800"', 1), encoding="utf-8")
    line = text.splitlines().index(next(x for x in text.splitlines() if x.startswith(model))) + 1
    with pytest.raises(ConfigError, match=rf"params.yaml:{line}: not valid YAML \(a lone surrogate"):
        load_params(path)


# -- backends: a failed call, retried, counted, stored nowhere ---------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_reply_holding_a_half_is_a_failed_call_retried_counted_and_stored_nowhere(
    tmp_path: Path, kind: str
) -> None:
    """The fake servers write JSON with json.dumps, so the reply's text goes out as the escape, as
    a server's may; the backends read the body with orjson, then json (which lets the half in)."""
    said = f"Score: 3 {HALF}"
    with FakeOllama(responder=lambda _: said) as ollama, FakeOpenAI(responder=lambda _: said) as openai:
        backend = backend_of(kind, ollama, openai, max_retries=2)
        if kind == "openai":  # the fake's own token count cannot encode it: the body, as sent
            backend.identity()
            choice = {"index": 0, "message": {"role": "assistant", "content": said}, "finish_reason": "stop"}
            openai.send_next(*[{"choices": [choice], "model": "test-model"}] * 3)
        run = session(tmp_path, backend)
        with pytest.raises(UnreadableReplyError, match=r"a lone surrogate .*gave up after 3 attempts"):
            run.chat(request("judge this"), CallContext(stage="judge", item="1"))
        assert_tried_and_kept_nowhere(
            run, tmp_path, kind, ollama, openai, attempts=3, counted_as="unreadable_replies"
        )


def test_a_batch_answer_holding_a_half_is_a_failed_call() -> None:
    """Batch ingest reads each answer's body with completion_reply, as the OpenAI backend does."""
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}], "model": HALF}
    with pytest.raises(UnreadableReplyError, match=r"results.jsonl:4: the reply holds a lone surrogate"):
        completion_reply(body, request("x"), "results.jsonl:4")


# -- the writers: the last line of defence -----------------------------------------------------------


def test_no_record_of_a_call_holding_a_half_can_be_made() -> None:
    model = ModelIdentity(backend="fake", name="m", digest="sha256:" + "0" * 64)
    with pytest.raises(UnwritableTextError, match=r"lone surrogate \(\\ud800"):
        CallRecord.new(model, request("hi"), ChatReply(text="a" + HALF))
    with pytest.raises(UnwritableTextError, match=r"lone surrogate \(\\udc00"):
        CallRecord.new(model, request("h\udc00i"), ChatReply(text="a"))


def test_a_file_is_never_written_with_a_half_and_the_old_one_stays(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    path.write_text("old\n")
    with pytest.raises(UnwritableTextError, match=r"calls.jsonl: not written: line 2 would hold a lone"):
        atomic_write(path, 'one\n{"text": "' + HALF + '"}\n')
    assert path.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["calls.jsonl"]


def test_the_terminal_is_shown_a_half_as_its_escape() -> None:
    assert shown("a" + HALF + "b") == "a\\ud800b"
    assert shown("\U0001f600") == "\U0001f600"


@pytest.mark.parametrize("kind", ["ollama", "openai"])
def test_a_model_listing_holding_a_half_is_refused_before_it_enters_a_key(kind: str) -> None:
    """The listing names the model (and, for an OpenAI-compatible server, its id and root make the
    digest): a half there could not be hashed into any key, a traceback on every call."""
    if kind == "ollama":
        backend: OllamaBackend | OpenAICompatBackend = OllamaBackend(
            settings("http://127.0.0.1:9"), wait=wait_none()
        )
        listing = {"models": [{"name": "test-model:latest", "digest": "sha256:" + "a" * 63 + HALF}]}
    else:
        backend = OpenAICompatBackend(settings("http://127.0.0.1:9", backend="openai"), wait=wait_none())
        listing = {"data": [{"id": "test-model", "root": "/models/" + HALF}]}
    backend._exchange = lambda *args, **kwargs: listing  # type: ignore[method-assign]
    with pytest.raises(UnreadableReplyError, match="the reply holds a lone surrogate"):
        backend.identity()


@pytest.mark.parametrize(
    "body",
    [
        {"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok " + HALF}}]},
        {"error": {"message": "overloaded " + HALF}},
    ],
)
def test_a_batch_runner_writes_a_reply_holding_a_half_as_the_call_s_error(body: dict[str, object]) -> None:
    """`batch run --ray` reads each answer with the json module: a half in it failed the whole
    results file (orjson cannot write it); it is now that call's error, which ingest reports."""
    line = orjson.loads(batch_line("jl2:" + "0" * 32, body))
    assert line["response"] is None and "a lone surrogate" in line["error"]["message"]
