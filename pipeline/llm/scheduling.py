"""Which call goes to the model next: the oldest item's first, so items finish in the order they
started and the last ones get every slot.

A stage's items run side by side (pipeline.llm.runner), and an item may send several independent
calls at once (`side_by_side`: the paper's judge asks its four metrics together). More calls then
want a slot than the server has; the session lets them through a `RankedGate`, as many at a time
as it keeps at the server, the call of the earliest-started item first. Without the ranking the
items would share the slots evenly and all finish late together; with it, each item runs at the
speed of its own replies (its next call goes out as soon as its reply is read, ahead of later
items' calls), and when the stage's last items are the only ones left, their independent calls
fill the slots instead of waiting for each other.

The rank travels with the call in a context variable: set by the runner for each item, copied into
the threads `side_by_side` starts.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, wait
from contextlib import contextmanager
from contextvars import ContextVar, copy_context
from typing import Any, TypeVar

from pipeline.errors import ReplayMissError

R = TypeVar("R")

# The rank of the item whose work this thread is doing (its position in the stage's items).
ITEM_RANK: ContextVar[int] = ContextVar("judgeloop_item_rank", default=0)


class RankedGate:
    """At most `capacity` holders at once; a freed place goes to the waiter of lowest rank (then the
    first to ask)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._held = 0
        self._waiting: list[tuple[int, int]] = []  # (rank, ticket), a heap
        self._tickets = itertools.count()
        self._cond = threading.Condition()
        _threads().reserve(capacity)  # as many side-by-side threads as calls it lets through

    @contextmanager
    def place(self, rank: int | None = None) -> Iterator[None]:
        rank = ITEM_RANK.get() if rank is None else rank
        with self._cond:
            entry = (rank, next(self._tickets))
            heapq.heappush(self._waiting, entry)
            while self._held >= self.capacity or self._waiting[0] != entry:
                self._cond.wait()
            heapq.heappop(self._waiting)
            self._held += 1
            self._cond.notify_all()  # the next waiter may fit too
        try:
            yield
        finally:
            with self._cond:
                self._held -= 1
                self._cond.notify_all()


# Threads the side-by-side pool starts at most, before any gate asks for more (`RankedGate` raises
# it to its capacity): in auto mode items run side by side on hits before the first call to the
# model opens the gate (a replay asks no threads of the pool: LLMSession.calls_at_once).
MIN_THREADS = 8


class RankedPool:
    """Threads for the items' side-by-side calls, at most `limit`, started as tasks wait and living
    on; a freed thread takes the waiting task of lowest rank (then the first submitted).

    Why a limit: diskcache opens a database connection per thread, to each of the cache's two
    databases, and each connection maps up to 64 MB of its file (sqlite_mmap_size). An unbounded
    pool grew to every call asked at once (a replay's 8 items x 4 metrics: 32 threads, 1.7 GB of
    the 96k-call bench's 4.4 GB peak was those mappings), yet no more calls than the session's gate
    lets through can be at the model at once. So the pool keeps as many threads as the largest gate
    (`reserve`), and what waits for a thread waits in rank order, as it would at the gate: the
    earliest item's calls go first, and the last items' calls still fill every place at the model.
    Its tasks never wait on one another, so a full pool only queues them."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._threads = 0
        self._idle = 0
        self._starting = 0  # started, not yet waiting for a task
        self._waiting: list[tuple[int, int, Callable[[], Any], Future[Any]]] = []  # a heap
        self._tickets = itertools.count()
        self._cond = threading.Condition()
        self._started: list[threading.Thread] = []
        self._closing = False

    @property
    def threads(self) -> int:
        return self._threads

    def reserve(self, threads: int) -> None:
        """Let the pool keep at least `threads` threads (a gate's capacity); tasks already waiting
        for a thread get one now."""
        with self._cond:
            self.limit = max(self.limit, threads)
            self._grow()

    def submit(self, rank: int, task: Callable[[], R]) -> Future[R]:
        future: Future[Any] = Future()
        with self._cond:
            heapq.heappush(self._waiting, (rank, next(self._tickets), task, future))
            self._grow()
            self._cond.notify()
        return future

    def _grow(self) -> None:
        """A thread for each waiting task no idle thread will take, up to the limit (lock held)."""
        while len(self._waiting) > self._idle + self._starting and self._threads < self.limit:
            self._threads += 1
            self._starting += 1
            thread = threading.Thread(target=self._work, name=f"side-by-side_{self._threads}", daemon=True)
            self._started.append(thread)
            thread.start()

    def _work(self) -> None:
        with self._cond:
            self._starting -= 1
        while (job := self._take()) is not None:
            _, _, task, future = job
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(task())
                except BaseException as exc:  # the caller's, as a ThreadPoolExecutor would hand it
                    future.set_exception(exc)
            del job, task, future  # hold no finished task's closure while idle

    def _take(self) -> tuple[int, int, Callable[[], Any], Future[Any]] | None:
        """The waiting task of lowest rank, once there is one; None once the pool is shut down."""
        with self._cond:
            self._idle += 1
            while not self._waiting and not self._closing:
                self._cond.wait()
            self._idle -= 1
            return heapq.heappop(self._waiting) if self._waiting else None

    def shutdown(self, wait: bool = True) -> None:
        """End the threads once the tasks waiting are run (as ThreadPoolExecutor.shutdown)."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if wait:
            for thread in self._started:
                thread.join()


_pool: tuple[int, RankedPool] | None = None
_pool_lock = threading.Lock()


def _threads() -> RankedPool:
    """One pool for every item's side-by-side calls, whose threads live on: a thread per call,
    started and ended for each item, would also open a database connection of its own to the
    cache each time (diskcache keeps one per thread). One per process: a forked child inherits
    the pool's bookkeeping but none of its threads."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid():
            _pool = (os.getpid(), RankedPool(MIN_THREADS))
        return _pool[1]


def side_by_side(tasks: Sequence[Callable[[], R]], *, at_once: bool) -> list[R]:
    """Run one item's independent calls, their results in order: at once, in the item's rank,
    where a server answers them; else one after another in this thread (`at_once` False,
    LLMSession.calls_at_once: a replay, whose calls are hits served under the GIL, or a dry run,
    which waits on no model; threads would only add their handovers: bench/README.md, "A replay on
    one thread").

    Either way every task runs to its end. A replay miss in one does not stop the others, so that
    replay names every missing call; the first miss is raised after all have ended, or, before it,
    the first other error."""
    if len(tasks) <= 1:
        return [task() for task in tasks]
    if not at_once:
        return _in_turn(tasks)
    pool = _threads()
    rank = ITEM_RANK.get()
    futures = [pool.submit(rank, functools.partial(copy_context().run, task)) for task in tasks]
    wait(futures)
    _raise_first([f.exception() for f in futures])
    return [f.result() for f in futures]


def _in_turn(tasks: Sequence[Callable[[], R]]) -> list[R]:
    """Each task to its end, one after another, each in a copy of this context as a pool thread
    would run it; raised as `side_by_side` raises."""
    results: list[R] = []
    errors: list[BaseException | None] = []
    for task in tasks:
        try:
            results.append(copy_context().run(task))
            errors.append(None)
        except Exception as exc:  # an interrupt or exit is not a task's outcome: it stops at once
            errors.append(exc)
    _raise_first(errors)
    return results


def _raise_first(errors: Sequence[BaseException | None]) -> None:
    """The first error other than a replay miss, or else the first miss (in the tasks' order)."""
    if failed := [e for e in errors if e is not None and not isinstance(e, ReplayMissError)]:
        raise failed[0]
    if misses := [e for e in errors if e is not None]:
        raise misses[0]
