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

import heapq
import itertools
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from contextvars import ContextVar, copy_context
from typing import TypeVar

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


_pool: tuple[int, ThreadPoolExecutor] | None = None
_pool_lock = threading.Lock()


def _threads() -> ThreadPoolExecutor:
    """One pool for every item's side-by-side calls, whose threads live on: a thread per call,
    started and ended for each item, would also open a database connection of its own to the
    cache each time (diskcache keeps one per thread). One per process: a forked child inherits
    the pool's bookkeeping but none of its threads. Its tasks never wait on one another, so a
    full pool only queues them."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid():
            _pool = (os.getpid(), ThreadPoolExecutor(max_workers=256, thread_name_prefix="side-by-side"))
        return _pool[1]


def side_by_side(tasks: Sequence[Callable[[], R]]) -> list[R]:
    """Run one item's independent calls at once, in the item's rank; their results in order.

    Every task runs to its end. A replay miss in one does not stop the others, so that replay
    names every missing call; the first miss is raised after all have ended, or, before it, the
    first other error."""
    if len(tasks) <= 1:
        return [task() for task in tasks]
    pool = _threads()
    futures = [pool.submit(copy_context().run, task) for task in tasks]
    wait(futures)
    errors = [f.exception() for f in futures]
    if failed := [e for e in errors if e is not None and not isinstance(e, ReplayMissError)]:
        raise failed[0]
    if misses := [e for e in errors if e is not None]:
        raise misses[0]
    return [f.result() for f in futures]
