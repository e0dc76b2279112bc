"""A session's served calls kept on disk (pipeline.llm.served_log, issue 33): read back, they are the
calls as served, in order, contexts field for field (the fields given, too)."""

from __future__ import annotations

import threading
import tracemalloc

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.llm import served_log
from pipeline.llm.records import ServedCall
from pipeline.llm.served_log import ServedLog
from pipeline.llm.types import CallContext

text = st.text(max_size=12)  # any character, a lone surrogate included (orjson refuses one: see below)
contexts = st.builds(
    CallContext,
    stage=text,
    item=text,
    step=st.none() | st.integers(-5, 10**12),
    attempt=st.integers(0, 99),
    labels=st.dictionaries(text, text, max_size=3),
)
plain = st.text(st.characters(blacklist_categories=["Cs"]), max_size=12)


@settings(deadline=None)  # a loaded machine makes an example slow, not wrong
@given(st.lists(st.tuples(contexts, plain, st.booleans()), max_size=30))
def test_read_back_as_served(calls: list[tuple[CallContext, str, bool]]) -> None:
    served = [ServedCall(context, key, hit) for context, key, hit in calls]
    try:
        expected = [(s.context, s.context.model_fields_set, s.key, s.cache_hit) for s in served]
        log = ServedLog()
        for call in served:
            log.append(call)
    except TypeError:  # a context holding a lone surrogate: orjson refuses it (a call never holds one)
        return
    got = [(s.context, s.context.model_fields_set, s.key, s.cache_hit) for s in log]
    assert got == expected and len(log) == len(served)


def test_many_calls_across_reads() -> None:
    """More calls than one read takes, from threads: each read back once, whole."""
    log = ServedLog()
    context = CallContext(stage="judge", item="301", step=2).at(metric="sleep")

    def serve(first: int) -> None:
        for n in range(first, first + 2500):
            log.append(ServedCall(context.at(attempt=n % 3), f"{n:064x}", n % 2 == 0))

    threads = [threading.Thread(target=serve, args=(n * 2500,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    read = list(log)
    assert len(read) == len(log) == 10_000 > served_log.READ_AT_ONCE
    assert sorted(int(s.key, 16) for s in read) == list(range(10_000))
    assert all(s.cache_hit == (int(s.key, 16) % 2 == 0) for s in read)
    assert all(s.context.at(attempt=0) == context.at(attempt=0) for s in read)
    assert all(s.context.attempt == int(s.key, 16) % 3 for s in read)


def test_empty_and_closed() -> None:
    log = ServedLog()
    assert list(log) == [] and len(log) == 0
    log.append(ServedCall(CallContext(stage="assess"), "k"))
    assert [s.key for s in log] == ["k"]
    log.close()
    assert list(log) == [] and len(log) == 0


def test_holds_no_context() -> None:
    """The log's memory is its array of line ends: the contexts served are not kept (a list of
    ServedCalls held about 1.5 kB a call)."""
    log = ServedLog()
    context = CallContext(stage="judge", item="301", step=2)
    log.append(ServedCall(context, "k0"))  # the file opened
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(5000):
            log.append(ServedCall(context.at(metric=f"m{n}", attempt=n % 3), f"jl2:{n:032x}", True))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 5000 * 16 + 8192, held
    assert [s.context.label("metric") for s in log][1:] == [f"m{n}" for n in range(5000)]


@settings(deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=40), st.data())
def test_line_file_reads_back_any_range_as_appended(lines: list[bytes], data: st.DataObject) -> None:
    """The store the served log and a recording's spool share (pipeline.llm.line_file): lines of
    any bytes (empty ones, newlines inside) come back by number and by range, in one read each."""
    from pipeline.llm.line_file import LineFile

    store = LineFile(prefix="judgeloop-test-")
    assert [store.append(line) for line in lines] == list(range(len(lines)))
    assert len(store) == len(lines)
    first = data.draw(st.integers(0, len(lines)))
    end = data.draw(st.integers(0, len(lines)))
    assert store.read(first, end) == lines[first:end]
    assert [store.line(n) for n in range(len(lines))] == lines
    store.close()
    assert len(store) == 0 and store.read(0, 0) == []
