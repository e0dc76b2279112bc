"""Run one stage's items side by side, as many as the session's workers (a replay's one after
another in the stage's own thread: no model to wait for, LLMSession.calls_at_once).

Each item runs its own calls from start to end (a loop's next round goes out as soon as its own
replies are in: no item waits for another's), ranked by its place in the items, so that its calls
go to the model before later items' (pipeline.llm.scheduling). Results come out in the items'
order whatever order they finished in, each as soon as it and every item before it are done
(`iter_items`), so that a stage writes them as they come and never holds the whole stage's (issue
33: refine's results carry each round's 20 kB prompt). A replay miss stops only its own item
(later calls of that item depend on the missing reply); the stage then fails listing every missing
call. Any other error stops the stage after the running items finish: every call that completed is
already in the cache, so a rerun resumes without repeating it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextvars import copy_context
from typing import Generic, ParamSpec, TypeVar

from pipeline.errors import ReplayMissError
from pipeline.llm.scheduling import ITEM_RANK
from pipeline.llm.session import LLMSession

T = TypeVar("T")
R = TypeVar("R")


# Items submitted to the pool ahead of those running, per worker: enough that no worker waits for
# the next item, few enough that waiting for the next to finish looks at a handful of futures.
AHEAD = 2
# Items started but not yet handed on, per worker: those running and those finished while an
# earlier item still runs. It bounds the reorder buffer: a slow item holds up at most this many.
WINDOW = 8


class _Ordered(Generic[R]):
    """Finished items' results, handed on in the items' order (a small reorder buffer). An item
    stopped (a replay miss, a cancel) is put as None: it has no result, and the next goes on."""

    def __init__(self) -> None:
        self.waiting: dict[int, tuple[R] | None] = {}
        self.next = 0

    def put(self, index: int, result: tuple[R] | None) -> None:
        self.waiting[index] = result

    def ready(self) -> Iterator[R]:
        while self.next in self.waiting:
            result = self.waiting.pop(self.next)
            self.next += 1
            if result is not None:
                yield result[0]


def iter_items(session: LLMSession, items: Iterable[T], work: Callable[[T], R], desc: str) -> Iterator[R]:
    """Each item's work on the session's workers; the results in the items' order, each yielded once
    it and every earlier item are done. Items are handed to the pool a few at a time as others
    finish (AHEAD), in their order: waiting on every item's future at once cost each finished item
    a pass over all of them, a time quadratic in the run (issue 33: 10^5 items at a million calls);
    and no more than WINDOW per worker are started and not yet handed on. `items` is read as the
    items start (a file read again an item at a time, say: pipeline.data.results_file). After the
    last result, the first error other than a replay miss is raised, or else the session's misses."""

    if not session.calls_at_once:
        yield from _in_turn(session, items, work)
        return

    ordered: _Ordered[R] = _Ordered()
    failure: BaseException | None = None
    queued = iter(enumerate(items))
    # The stage's progress (pipeline.llm.progress) follows the session's calls, not the items.
    workers = session.workers
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=desc) as pool:
        pending: dict[Future[R], int] = {}
        while True:
            # No new item once one has failed: the stage stops after the running items finish.
            while failure is None and len(pending) < workers * (1 + AHEAD):
                if len(pending) + len(ordered.waiting) >= workers * WINDOW:
                    break
                following = next(queued, None)
                if following is None:
                    break
                index, item = following
                pending[pool.submit(copy_context().run, _ranked, work, index, item)] = index
            if not pending:
                break
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                index = pending.pop(future)
                error = None if future.cancelled() else future.exception()
                if future.cancelled() or error is not None:
                    ordered.put(index, None)
                    if error is not None and not isinstance(error, ReplayMissError) and failure is None:
                        failure = error
                        for other in pending:
                            other.cancel()
                else:
                    ordered.put(index, (future.result(),))
            if failure is None:
                yield from ordered.ready()
    if failure is not None:
        raise failure
    session.raise_for_misses()


def _ranked(work: Callable[[T], R], rank: int, item: T) -> R:
    ITEM_RANK.set(rank)
    return work(item)


def _in_turn(session: LLMSession, items: Iterable[T], work: Callable[[T], R]) -> Iterator[R]:
    """The items one after another in this thread where no model answers the calls
    (LLMSession.calls_at_once false: a replay, every call a hit served under the GIL; or a dry run,
    which waits on no model): a single worker would only hand each item over, and wait for this
    thread to wake and hand it the next (about a voluntary context switch a call: bench/README.md,
    "A replay on one thread"). Each runs as on a worker, ranked, in a copy of this context; as
    iter_items, a miss stops only its item and the session's misses are raised after the last, and
    any other error stops the stage (no other item is running)."""
    for index, item in enumerate(items):
        try:
            result = copy_context().run(_ranked, work, index, item)
        except ReplayMissError:
            continue  # in the session's misses, raised after the last item
        yield result
    session.raise_for_misses()


def run_items(session: LLMSession, items: Sequence[T], work: Callable[[T], R], desc: str) -> list[R]:
    """iter_items, held whole: the results in the items' order."""
    return list(iter_items(session, items, work, desc))


Args = ParamSpec("Args")


def held(stream: Callable[Args, Iterable[R]]) -> Callable[Args, list[R]]:
    """A stage's streamed work (its results yielded in the items' order), held whole: for a caller
    that needs them all at once (a test, a bench, a dry run)."""

    @functools.wraps(stream)
    def run(*args: Args.args, **kwargs: Args.kwargs) -> list[R]:
        return list(stream(*args, **kwargs))

    return run
