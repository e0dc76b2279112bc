"""Fuzzing the readers of the record (issue 28): recording lines and whole recording files, cache
rows, dvc.lock, params.yaml, batch results files; and the recordings' write → read round trip.
See tests/fuzz/support.py for the property and the example counts."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import click
import orjson
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from pipeline.errors import CorruptRecordError
from pipeline.experiments.params import load_params
from pipeline.llm.bounds import surrogate_problem
from pipeline.llm.cache.store import MAGIC, CallStore, seal
from pipeline.llm.recordings.item_reader import read_items
from pipeline.llm.recordings.line_checks import parse_call_line
from pipeline.llm.recordings.pins import Pins
from pipeline.llm.recordings.stage_folders import CALLS_FILE
from pipeline.llm.recordings.stage_index import index_stage
from pipeline.llm.recordings.stage_reader import read_stage, split_recording
from pipeline.llm.recordings.stage_writer import write_stage
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import CallContext, ChatReply, ChatRequest, Message, ModelIdentity
from pipeline.testing.fake_batch import answer
from pipeline.testing.fake_openai import FakeOpenAI
from pipeline.testing.judge_responder import experiment_responder
from pipeline.tools.batch.exchange import ingest
from pipeline.tools.batch.manifest import REQUESTS_FILE
from tests.fuzz.batch_export import export_two_calls
from tests.fuzz.support import (
    LINE_BREAKS,
    ROOT,
    clear_or_correct,
    committed,
    encoded,
    fuzz,
    inputs,
    keys_shown,
    only_inside,
    texts,
    time_bound,
)

RECORDING = committed("recordings/judge/calls.jsonl")
CALL_LINE, *_ = RECORDING.split(b"\n")
BLOB_LINES = [line for line in RECORDING.split(b"\n") if line.startswith(b'{"blob":')]


# -- recordings -----------------------------------------------------------------------------------


def _blobs() -> dict[str, str]:
    return {entry["blob"]: entry["text"] for entry in map(orjson.loads, BLOB_LINES)}


@fuzz
@given(line=inputs(CALL_LINE))
def test_a_recording_line(line: bytes) -> None:
    text = line.decode("utf-8", "replace")
    call = clear_or_correct(lambda: parse_call_line(text, _blobs(), "calls.jsonl:1"))
    if isinstance(call, RecordedCall):
        clear_or_correct(call.record.problem)


@fuzz
@given(data=inputs(RECORDING, CALL_LINE + b"\n"))
def test_a_whole_recording_file(sandbox: Path, data: bytes) -> None:
    stage = sandbox / "recordings" / "judge"
    stage.mkdir(parents=True, exist_ok=True)
    (stage / CALLS_FILE).write_bytes(data)
    clear_or_correct(lambda: list(read_stage(stage)))
    clear_or_correct(lambda: split_recording(stage))
    # The lazy readers (issues 31, 33): the stage's index, a lookup of each key, audit's item scan.
    clear_or_correct(lambda: [index.call(key) for index in [index_stage(stage)] for key in index.at])
    keys_shown(stage)
    clear_or_correct(lambda: list(read_items(stage, {"903", ""})))
    only_inside(sandbox.parent, sandbox)


line_broken_texts = st.lists(st.one_of(texts, st.sampled_from(LINE_BREAKS)), max_size=8).map("".join)


Draft = tuple[CallContext, ModelIdentity, ChatRequest, ChatReply]


@st.composite
def drafted_calls(draw: st.DrawFn) -> Draft:
    """A call's parts, before its record is made: the record itself refuses a lone surrogate."""
    messages = tuple(
        Message(role=draw(st.sampled_from(["system", "user", "assistant"])), content=draw(line_broken_texts))
        for _ in range(draw(st.integers(1, 3)))
    )
    model = ModelIdentity(backend="fake", name=draw(texts.filter(bool)), digest="sha256:" + "0" * 64)
    reply = ChatReply(text=draw(line_broken_texts), done_reason=draw(st.one_of(st.none(), texts)))
    context = CallContext(stage="judge", item=draw(texts), step=draw(st.integers(0, 9)))
    return context, model, ChatRequest(messages=messages), reply


@fuzz
@given(drafts=st.lists(drafted_calls(), min_size=1, max_size=3))
def test_a_recording_reads_back_exactly_what_was_written(sandbox: Path, drafts: list[Draft]) -> None:
    """Over arbitrary Unicode (lone surrogates included), every line-break class: what is written
    reads back exactly; a call holding a lone surrogate, which no UTF-8 file can hold, is refused
    with a clear error when its record is made (its prompt or reply) or written (its context)."""
    stage = sandbox / "recordings" / "roundtrip"
    shutil.rmtree(stage, ignore_errors=True)
    calls: list[RecordedCall] = []
    for context, model, chat, reply in drafts:
        record = clear_or_correct(partial(CallRecord.new, model, chat, reply))
        halved = surrogate_problem([part.model_dump() for part in (model, chat, reply)]) is not None
        assert halved == isinstance(record, click.ClickException), record
        if not isinstance(record, CallRecord):
            event("refused when its record was made: a lone surrogate in a prompt or reply")
            return
        calls.append(RecordedCall(context=context, record=record))
    written = clear_or_correct(lambda: write_stage(stage, calls))
    if isinstance(written, click.ClickException):
        assert any(surrogate_problem(call.context.model_dump()) for call in calls), written
        assert not (stage / CALLS_FILE).exists()
        event("refused when written: a lone surrogate in a call's context")
        return
    with time_bound():
        read = {(*c.call.context.sort_key(), c.call.record.key): c.call for c in read_stage(stage)}
    assert read == {(*c.context.sort_key(), c.record.key): c for c in calls}
    event("written and read back")  # one line per context and key


# -- cache rows -----------------------------------------------------------------------------------


def _first_record() -> CallRecord:
    [loaded, *_] = read_stage(ROOT / "recordings" / "judge")
    return loaded.call.record


RECORD = _first_record()
HEADER = RECORD.model_dump_json(exclude={"request"}).encode()
REQUEST = RECORD.request.model_dump_json().encode()
VALUE = MAGIC + seal(HEADER) + b"\n" + HEADER + b"\n" + REQUEST


@st.composite
def cache_values(draw: st.DrawFn) -> bytes:
    """A row's value: edited as stored (its seal then fails), or edited and sealed again (as a forger
    would), so that the header's parser and validation are reached."""
    if draw(st.booleans()):
        return draw(inputs(VALUE, HEADER))
    header = draw(inputs(HEADER))
    request = draw(st.one_of(st.just(REQUEST), inputs(REQUEST)))
    return MAGIC + seal(header) + b"\n" + header + b"\n" + request


@pytest.fixture(scope="module")
def store(sandbox: Path) -> Iterator[CallStore]:
    opened = CallStore(sandbox / ".judgeloop" / "fuzz-cache")
    try:
        yield opened
    finally:
        opened.close()


@fuzz
@given(value=cache_values())
def test_a_cache_row(store: CallStore, value: bytes) -> None:
    store.put_raw(RECORD.key, value)
    clear_or_correct(lambda: store.get(RECORD.key, RECORD.request))  # a hit: the header alone
    record = clear_or_correct(lambda: store.get(RECORD.key))  # an audit: the stored request too
    if isinstance(record, CallRecord):
        clear_or_correct(record.problem)
    inspected = clear_or_correct(lambda: store.inspect(RECORD.key))
    assert not isinstance(inspected, tuple) or inspected != (None, None)  # a row is there


# -- dvc.lock and params.yaml ---------------------------------------------------------------------


@fuzz
@given(data=inputs(committed("dvc.lock")))
def test_dvc_lock(sandbox: Path, data: bytes) -> None:
    (sandbox / "dvc.lock").write_bytes(data)
    (sandbox / "recordings" / "judge").mkdir(parents=True, exist_ok=True)
    pins = Pins(sandbox, sandbox / "recordings")
    clear_or_correct(lambda: pins.problem(sandbox / "recordings" / "judge"))


@fuzz
@given(data=inputs(committed("params.yaml")))
def test_params_yaml(sandbox: Path, data: bytes) -> None:
    path = sandbox / "fuzzed" / "params.yaml"  # beside the project's own, which the batch tests read
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    clear_or_correct(lambda: load_params(path))
    # The environment's overrides (a CI machine's JUDGELOOP_BASE_URL) laid over whatever it holds.
    clear_or_correct(lambda: load_params(path, environ=OVERRIDES))


OVERRIDES = {"JUDGELOOP_BASE_URL": "http://127.0.0.1:8000", "JUDGELOOP_CACHE_DIR": ".judgeloop/other"}


@pytest.mark.parametrize("text", ["llm: 5\n", "cache: [1]\n", "llm: text\ncache: null\n"])
def test_an_override_over_a_section_of_another_shape_names_the_section(sandbox: Path, text: str) -> None:
    """Found by the property above: the environment's override was set into a section that was no
    mapping, a TypeError's traceback in every stage; now the section's own error, naming its line."""
    path = sandbox / "fuzzed" / "params.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    with pytest.raises(click.ClickException, match=r"params\.yaml"):
        load_params(path, environ=OVERRIDES)


# -- batch results --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def exported(sandbox: Path) -> Path:
    """An export of the default experiment's first two calls, as tests/test_batch.py makes it."""
    return export_two_calls(sandbox, "batch")


def _answers(folder: Path) -> bytes:
    server = FakeOpenAI(responder=experiment_responder, max_model_len=65536)
    lines = [orjson.loads(line) for line in (folder / REQUESTS_FILE).read_bytes().splitlines()]
    return b"".join(orjson.dumps(answer(server, line, n)) + b"\n" for n, line in enumerate(lines, 1))


@fuzz
@given(data=st.data())
def test_a_batch_results_file(sandbox: Path, exported: Path, data: st.DataObject) -> None:
    results = sandbox / "results.jsonl"
    results.write_bytes(data.draw(inputs(_answers_once(exported))))
    clear_or_correct(lambda: ingest(load_params(sandbox / "params.yaml"), results, exported))
    only_inside(sandbox.parent, sandbox)


_ANSWERS: dict[Path, bytes] = {}


def _answers_once(folder: Path) -> bytes:
    if folder not in _ANSWERS:
        _ANSWERS[folder] = _answers(folder)
    return _ANSWERS[folder]


def test_the_seeds_are_valid() -> None:
    """The edited seeds start from files the readers accept (else the fuzzing would stop at once)."""
    assert isinstance(parse_call_line(CALL_LINE.decode(), _blobs(), "x:1"), RecordedCall)
    assert RECORD.problem() is None
    with pytest.raises(CorruptRecordError):
        parse_call_line("{}", {}, "x:1")
    assert encoded("\ud800") == b"\xed\xa0\x80"
