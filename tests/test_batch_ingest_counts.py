"""Batch ingest's two counts (replies stored, already in the cache) taken from the cache's batched
writes, not from a lookup of each key on its own (issue 33: one SQLite lookup a call, in a key index
that outgrows SQLite's page cache as the cache grows)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest

from pipeline.experiments.params import load_params
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.cache import store as store_module
from pipeline.llm.cache.store import CallStore
from pipeline.llm.records import CallRecord
from pipeline.llm.types import ChatRequest, Message
from pipeline.tools.batch import exchange
from pipeline.tools.batch.exchange import ingest
from tests.test_batch import _answers, _write, exported  # noqa: F401  (exported: the fixture)


class _Traced(CallStore):
    """A CallStore that keeps every SQL statement its records' connection runs."""

    statements: ClassVar[list[str]] = []

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self._cache._con.set_trace_callback(type(self).statements.append)


def test_ingest_looks_up_no_key_on_its_own(exported: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    results = _write(exported / "results.jsonl", _answers(exported))
    monkeypatch.setattr(_Traced, "statements", [])
    monkeypatch.setattr(exchange, "CallStore", _Traced)
    outcome = ingest(load_params(), results, exported)
    assert (outcome.stored, outcome.known) == (2, 0)
    # The batch's own check (`SELECT ... key IN (...)`) asks for every key at once; a lookup of one
    # key (diskcache's `in`: `WHERE key = ...`) is a statement a call.
    single = [s for s in _Traced.statements if "WHERE key = " in s]
    assert single == []
    assert any(" IN (" in s for s in _Traced.statements)


@pytest.mark.parametrize("batch", [1, 512])  # a write at each answer, or one at the end
def test_stored_and_known_are_what_the_writes_found(
    exported: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    batch: int,
) -> None:
    monkeypatch.setattr(store_module, "SEED_BATCH", batch)
    good, other = _answers(exported)
    first = ingest(load_params(), _write(exported / "results.jsonl", [good]), exported)
    assert (first.stored, first.known) == (1, 0)
    both = ingest(load_params(), _write(exported / "results.jsonl", [other, good, other]), exported)
    assert (both.stored, both.known, both.refused, both.errors) == (1, 1, [], [])
    again = ingest(load_params(), _write(exported / "results.jsonl", [good, other]), exported)
    assert (again.stored, again.known) == (0, 2)


def test_an_entry_another_process_wrote_first_is_counted_known_not_stored(
    exported: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another writer (a parallel ingest of the same results) stores a key after this ingest took
    its answer and before this ingest's write: the cache keeps that entry (as `add` does), and the
    summary says so, rather than counting a reply this ingest did not store."""
    seed = CallStore.seed

    def seed_then_another_writes(self: CallStore, record: CallRecord, *rest: Any) -> int:
        wrote = seed(self, record, *rest)
        other = CallStore(self.directory)
        try:
            other.put(record)
        finally:
            other.close()
        return wrote

    monkeypatch.setattr(CallStore, "seed", seed_then_another_writes)
    outcome = ingest(load_params(), _write(exported / "results.jsonl", _answers(exported)), exported)
    assert (outcome.stored, outcome.known) == (0, 2)
    held = CallStore(Path(".judgeloop/cache"))
    try:
        assert len(held) == 2
    finally:
        held.close()


def test_each_write_says_how_many_records_it_stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What ingest counts with: `seed` gives 0 while it gathers and, when its batch is written, how
    many of the batch were new; `flush` the same for the rest; a key held already, or given twice,
    is not counted."""
    fake = FakeBackend()
    requests = [ChatRequest(messages=(Message(role="user", content=f"call {i}"),)) for i in range(5)]
    records = [CallRecord.new(fake.identity(), r, fake.chat(r)) for r in requests]
    monkeypatch.setattr(store_module, "SEED_BATCH", 3)
    store = CallStore(tmp_path / "cache")
    try:
        store.put(records[1])  # held before the batch is written
        assert [store.seed(r) for r in records[:3]] == [0, 0, 2]
        assert store.flush() == 0  # nothing gathered
        assert [store.seed(r) for r in (records[3], records[3], records[4])] == [0, 0, 0]
        assert store.flush() == 2  # records[3] once
        assert len(store) == 5
    finally:
        store.close()
