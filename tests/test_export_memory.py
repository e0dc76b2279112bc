"""`judgeloop batch export` streams its plan (issue 33 item 4): the calls a dry run plans for the
model are kept on disk in the experiment's order (pipeline.tools.status.planned), each read back as
the export writes it, so that what is held per planned call is a few bytes, never its request (a
million 2-20 kB prompts were 2-20 GB); the order, the repeats and every field read back are those
the old in-memory sort gave.

The bounds are on traced bytes (tracemalloc) against the number of calls, never on time."""

from __future__ import annotations

import random
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from pipeline.llm.key_table import KeyTable
from pipeline.llm.keys import request_key
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.session import LLMSession, RecordingIndex
from pipeline.llm.types import CallContext, ChatReply, ChatRequest, Message, ModelIdentity, Options
from pipeline.tools.status import planned
from pipeline.tools.status.dry_results import KEPT, Kept
from pipeline.tools.status.planned import PlanLog
from pipeline.tools.status.probe import placeholder, probe_stage

MODEL = ModelIdentity(backend="openai", name="m", digest="rev-1")
PROMPT_CHARS = 4000
# What the plan holds per call once the dry run ended: its line's end and its number in the order
# (8 bytes each, in arrays), its key counted (16 bytes in a table at most three quarters full), the
# dry run's own log (8 bytes); the old plan held each call's request, over 4 kB here.
HELD_PER_CALL = 80
FIXED_BYTES = 512 << 10
PEAK_PER_CALL = 1500
PEAK_FIXED_BYTES = 6 << 20  # 512 latest answers of 4 kB, and the fixed part


def _request(i: int) -> ChatRequest:
    text = f"call {i} " + "words of a long transcript " * (PROMPT_CHARS // 27)
    return ChatRequest(messages=(Message(role="user", content=text),), options=Options())


# -- the order: what the old sort in memory gave, through runs spilled to disk --------------------


def _old_plan(answers: list[RecordedCall], counted: set[str]) -> tuple[list[RecordedCall], int]:
    """The plan as probe_stage made it in memory before: the first answer at each place, sorted by
    place, each key a model call once (later ones repeats)."""
    placeheld: dict[tuple[object, ...], RecordedCall] = {}
    places = []
    for call in answers:
        place = (*call.context.sort_key(), call.record.key)
        placeheld.setdefault(place, call)
        places.append(place)
    calls, repeats = [], 0
    for place in sorted(places):
        key = placeheld[place].record.key
        if key in counted:
            repeats += 1
        else:
            counted.add(key)
            calls.append(placeheld[place])
    return calls, repeats


def _answers(count: int) -> list[RecordedCall]:
    """Placeholder answers in a shuffled order: items, steps (None too), labels, attempts; some
    requests asked at several places, some places answered twice with another context's fields."""
    rng = random.Random(7)
    answers = []
    for i in range(count):
        request = _request(rng.randrange(count // 3))  # a third as many requests: repeats
        key = request_key(MODEL, request)
        context = CallContext(
            stage="judge",
            item=str(rng.choice([9, 10, 100, 11])),
            step=rng.choice([None, 0, 1, 2]),
            attempt=rng.choice([0, 0, 1]),
            labels={"metric": rng.choice(["a", "b"]), "role": rng.choice(["", "judge", "assessor"])},
        )
        answers.append(
            RecordedCall(context, CallRecord.new(MODEL, request, ChatReply(text=placeholder(key))))
        )
        if i % 50 == 0:  # the same place (context's sort key, key) again: the first one stays
            answers.append(RecordedCall(context, answers[-1].record))
    return answers


@pytest.mark.parametrize("run", [7, planned.RUN])  # spilled in many runs, or sorted in memory
def test_the_plan_on_disk_is_the_old_plan_in_its_order(monkeypatch: pytest.MonkeyPatch, run: int) -> None:
    monkeypatch.setattr(planned, "RUN", run)
    answers = _answers(600)
    counted_before = {answers[3].record.key}  # counted by an earlier stage: a repeat here
    old, old_repeats = _old_plan(answers, set(counted_before))
    log = PlanLog()
    for call in answers:
        log.add(call)
    counted = KeyTable()
    for key in counted_before:
        counted.add(key)
    calls, repeats = log.done(counted)
    assert (len(calls), repeats) == (len(old), old_repeats)
    read = list(calls)
    assert [(c.context, c.key) for c in read] == [(c.context, c.record.key) for c in old]
    assert [c.context.model_fields_set for c in read] == [c.context.model_fields_set for c in old]
    assert [(c.model, c.request) for c in read] == [(c.record.model, c.record.request) for c in old]
    assert [c.request_json for c in read] == [c.record.request.model_dump(mode="json") for c in old]
    assert list(calls) == read  # read back as often as asked
    calls.close()


def test_the_key_table_is_a_set_of_keys() -> None:
    keys = [request_key(MODEL, _request(i)) for i in range(5000)]  # past a few doublings
    odd = ["not a key", keys[0].upper(), keys[1][:-1], keys[2].split(":")[0] + ":" + "0" * 32]
    held, plain = KeyTable(), set()
    for key in [*keys[::2], *odd[:2]]:
        held.add(key)
        plain.add(key)
        held.add(key)  # twice: once
    assert len(held) == len(plain)
    assert [k in held for k in keys + odd] == [k in plain for k in keys + odd]
    number: object = 3
    assert number not in held


# -- what a dry run holds per planned call ---------------------------------------------------------


def _probe(tmp_path: Path, calls: int, items: int) -> Any:
    """A stage's dry run asking `calls` calls of 4 kB prompts over `items` items, none known."""
    index = RecordingIndex(tmp_path / "recordings")

    def work(session: LLMSession) -> list[Kept]:
        for i in range(calls):
            context = CallContext(stage="judge", item=str(i % items)).at(metric=str(i % 4))
            session.chat(_request(i), context)
        return [Kept(str(item), True) for item in range(items)]

    return probe_stage(
        "judge",
        work,
        [str(item) for item in range(items)],
        KEPT,
        identity=MODEL,
        index=index,
        cache_dir=tmp_path / "no-cache",
        counted=KeyTable(),
    )


def test_a_dry_run_keeps_a_few_bytes_a_planned_call_not_its_request(tmp_path: Path) -> None:
    calls = 2000
    _probe(tmp_path, 100, 10)  # once first: what is made once per process
    tracemalloc.start()
    try:
        probe = _probe(tmp_path, calls, 10)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(probe.model_calls) == calls and probe.repeats == 0
    assert held <= FIXED_BYTES + HELD_PER_CALL * calls, f"{held / calls:.0f} bytes a planned call held"
    # While it runs: the session's latest answers (512 requests), its bookkeeping of each call and
    # the places not yet sorted (a few hundred bytes a call); not every request (the dry-run
    # session kept each one it was answered, as the plan did: over 8 kB a call here).
    assert peak <= PEAK_FIXED_BYTES + PEAK_PER_CALL * calls, f"{peak / calls:.0f} bytes a call at the peak"
    first = next(iter(probe.model_calls))  # read back from disk: the request as asked
    assert (first.context.item, first.context.label("metric")) == ("0", "0")
    assert first.key == request_key(MODEL, first.request) and len(first.request.messages[0].content) > 4000


# A dry-run session's own bookkeeping of each call (issue 33): it kept each key twice (run
# statistics, keys asked) and each call's place in a recording it never writes, about 250 bytes a
# call to the dry run's end; now only its served log's place of each call (8 bytes, its line on disk).
SESSION_BYTES_A_CALL = 64
SESSION_FIXED_BYTES = 2 << 20  # its latest answers and lookups (512 to 1,024 of each), whenever taken


def test_a_dry_run_session_keeps_no_key_or_place_of_each_call(tmp_path: Path) -> None:
    from pipeline.tools.status.probe import ProbeBackend

    backend = ProbeBackend(MODEL, tmp_path / "no-cache")
    session = LLMSession(
        stage="judge",
        mode="auto",
        store=None,
        index=RecordingIndex(tmp_path / "recordings"),
        recordings_dir=Path(),
        identity=lambda: MODEL,
        backend=lambda: backend,
        runs_dir=None,
        dry_run=True,
    )

    def ask(first: int, count: int) -> None:
        for i in range(first, first + count):
            request = ChatRequest(messages=(Message(role="user", content=f"call {i}"),), options=Options())
            session.chat(request, CallContext(stage="judge", item=str(i % 50)).at(metric=str(i % 4)))

    calls = 20_000
    ask(0, 1000)  # past the latest answers it keeps (512): what it holds at once, whatever the run
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        ask(1000, calls)
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    session.close(write_recording=False)
    assert len(session.served) == 1000 + calls and session.stats.model_calls == 1000 + calls
    assert session.recorded_calls == 0 and not session.stats.keys  # a dry run makes no line, no summary
    assert held <= SESSION_FIXED_BYTES + SESSION_BYTES_A_CALL * calls, f"{held / calls:.0f} bytes a call"
