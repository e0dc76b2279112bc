"""Which call goes to the model next (pipeline.llm.scheduling): the earliest item's first, and an
item's independent calls side by side."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline.errors import ReplayIncompleteError, ReplayMissError
from pipeline.llm import scheduling
from pipeline.llm.runner import run_items
from pipeline.llm.scheduling import ITEM_RANK, RankedGate, RankedPool, side_by_side
from pipeline.llm.types import CallContext
from tests.helpers import make_session, request


def test_a_freed_place_goes_to_the_lowest_rank_waiting() -> None:
    gate = RankedGate(1)
    order: list[int] = []
    holding = gate.place(rank=0)
    holding.__enter__()
    threads = []
    for rank in (5, 3, 9, 1):
        thread = threading.Thread(target=lambda r=rank: _enter(gate, r, order))
        thread.start()
        threads.append(thread)
        time.sleep(0.02)  # each is waiting before the next asks: ranks, not arrival, decide
    holding.__exit__(None, None, None)
    for thread in threads:
        thread.join(timeout=5)
    assert order == [1, 3, 5, 9]


def _enter(gate: RankedGate, rank: int, order: list[int]) -> None:
    with gate.place(rank=rank):
        order.append(rank)


def test_side_by_side_runs_at_once_in_the_items_rank_and_keeps_the_order() -> None:
    started = threading.Barrier(3, timeout=5)  # all three must be running at the same time

    def task(i: int) -> tuple[int, int]:
        started.wait()
        return i, ITEM_RANK.get()

    ITEM_RANK.set(7)
    try:
        tasks = [functools.partial(task, i) for i in range(3)]
        assert side_by_side(tasks, at_once=True) == [(0, 7), (1, 7), (2, 7)]
    finally:
        ITEM_RANK.set(0)


def test_side_by_side_in_turn_runs_in_this_thread_in_order_and_keeps_the_rank() -> None:
    # A replay's calls (LLMSession.calls_at_once): no pool thread, the tasks' order, the item's rank.
    here = threading.get_ident()
    ran: list[int] = []

    def task(i: int) -> tuple[int, int, bool]:
        ran.append(i)
        return i, ITEM_RANK.get(), threading.get_ident() == here

    ITEM_RANK.set(7)
    try:
        assert side_by_side([functools.partial(task, i) for i in range(3)], at_once=False) == [
            (0, 7, True),
            (1, 7, True),
            (2, 7, True),
        ]
    finally:
        ITEM_RANK.set(0)
    assert ran == [0, 1, 2]


class Ran:
    """Tasks that say they ran: a miss (its key named), a real error, a reply."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def miss(self, key: str = "jl2:x") -> Callable[[], str]:
        def task() -> str:
            self.names.append(f"miss {key}")
            raise ReplayMissError(key, None)

        return task

    def broken(self) -> str:
        self.names.append("broken")
        raise ValueError("boom")

    def fine(self) -> str:
        self.names.append("fine")
        return "ok"


AT_ONCE = pytest.mark.parametrize("at_once", [True, False], ids=["at once", "in turn"])


@AT_ONCE
def test_side_by_side_lets_every_task_end_and_raises_a_real_error_before_a_miss(at_once: bool) -> None:
    ran = Ran()
    with pytest.raises(ValueError, match="boom"):
        side_by_side([ran.miss(), ran.broken, ran.fine], at_once=at_once)
    assert sorted(ran.names) == ["broken", "fine", "miss jl2:x"]


@AT_ONCE
def test_side_by_side_runs_every_task_after_a_miss_and_raises_the_first_miss_after_all(at_once: bool) -> None:
    ran = Ran()
    with pytest.raises(ReplayMissError) as raised:
        tasks = [ran.fine, ran.miss("jl2:first"), ran.fine, ran.miss("jl2:second"), ran.fine]
        side_by_side(tasks, at_once=at_once)
    assert raised.value.key == "jl2:first"  # the first in the tasks' order, whichever ended first
    assert sorted(ran.names) == ["fine", "fine", "fine", "miss jl2:first", "miss jl2:second"]


@AT_ONCE
def test_side_by_side_raises_the_first_real_error_after_all(at_once: bool) -> None:
    ran = Ran()
    with pytest.raises(ValueError, match="boom"):
        side_by_side([ran.broken, ran.miss(), ran.fine], at_once=at_once)
    assert sorted(ran.names) == ["broken", "fine", "miss jl2:x"]


@AT_ONCE
def test_replay_names_every_missing_call_of_an_item_whose_calls_run_side_by_side(
    tmp_path: Path, at_once: bool
) -> None:
    session, _ = make_session(tmp_path, "replay")
    assert not session.calls_at_once  # what the judges pass: a replay's calls in turn

    def item(name: str) -> list[str]:
        context = CallContext(stage="judge", item=name)
        calls = [lambda m=m: session.chat(request(f"{name} {m}"), context.at(metric=m)) for m in "abc"]
        return [c.record.key for c in side_by_side(calls, at_once=at_once)]

    with pytest.raises(ReplayIncompleteError) as failed:
        run_items(session, ["901", "902"], item, "judge")
    assert len(failed.value.misses) == 6


def test_the_side_by_side_pool_keeps_its_limit_and_hands_a_free_thread_the_lowest_rank() -> None:
    """diskcache opens a connection (and maps up to 64 MB of each database) per thread: the pool
    starts no more threads than its limit, however many calls are asked at once, and what waits
    for a thread waits in rank order, as at the gate."""
    pool = RankedPool(1)
    release = threading.Event()
    order: list[int] = []
    first = pool.submit(0, release.wait)
    waiting = [pool.submit(rank, functools.partial(order.append, rank)) for rank in (5, 3, 9, 1)]
    assert pool.threads == 1
    release.set()
    first.result(timeout=5)
    for future in waiting:
        future.result(timeout=5)
    assert order == [1, 3, 5, 9]
    assert pool.threads == 1


def test_side_by_side_threads_stay_bounded_however_many_calls_items_ask_at_once() -> None:
    """Eight items asking four calls each (a replay) used to start 32 threads, each with its own
    connections to the cache; now at most the pool's limit, and a gate raises it to its capacity."""
    pool = scheduling._threads()
    before = pool.threads
    busy = threading.Semaphore(0)

    def item() -> None:
        side_by_side([functools.partial(busy.acquire, timeout=0.05) for _ in range(4)], at_once=True)

    items = [threading.Thread(target=item) for _ in range(8)]
    for thread in items:
        thread.start()
    for thread in items:
        thread.join(timeout=10)
    assert max(before, scheduling.MIN_THREADS) >= pool.threads
    RankedGate(scheduling.MIN_THREADS + 4)
    assert pool.limit >= scheduling.MIN_THREADS + 4


def test_a_gate_that_lets_more_calls_through_gives_the_waiting_tasks_threads_at_once() -> None:
    pool = RankedPool(1)
    release = threading.Event()
    first = pool.submit(0, release.wait)
    second = pool.submit(1, lambda: "ran")
    pool.reserve(2)  # as RankedGate(2) does: the second no longer waits for the first
    assert second.result(timeout=5) == "ran"
    assert pool.threads == 2
    release.set()
    assert first.result(timeout=5) is True
    pool.shutdown()
