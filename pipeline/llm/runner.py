"""Run one stage's items side by side, as many as the session's workers.

Each item runs its own calls from start to end (a loop's next round goes out as soon as its own
replies are in: no item waits for another's), ranked by its place in the items, so that its calls
go to the model before later items' (pipeline.llm.scheduling). Results come back in the items'
order whatever order they finished in. A replay miss stops only
its own item (later calls of that item depend on the missing reply); the stage then fails listing
every missing call. Any other error stops the stage after the running items finish: every call
that completed is already in the cache, so a rerun resumes without repeating it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextvars import copy_context
from typing import TypeVar

from pipeline.errors import ReplayMissError
from pipeline.llm.scheduling import ITEM_RANK
from pipeline.llm.session import LLMSession

T = TypeVar("T")
R = TypeVar("R")


# Items submitted to the pool ahead of those running, per worker: enough that no worker waits for
# the next item, few enough that waiting for the next to finish looks at a handful of futures.
AHEAD = 2


def run_items(session: LLMSession, items: Sequence[T], work: Callable[[T], R], desc: str) -> list[R]:
    """Each item's work on the session's workers; the results in the items' order. Items are handed
    to the pool a few at a time as others finish (AHEAD), in their order: waiting on every item's
    future at once cost each finished item a pass over all of them, a time quadratic in the run
    (issue 33: 10^5 items at a million calls)."""

    def ranked(rank: int, item: T) -> R:
        ITEM_RANK.set(rank)
        return work(item)

    results: dict[int, R] = {}
    failure: BaseException | None = None
    queued = iter(enumerate(items))
    # The stage's progress (pipeline.llm.progress) follows the session's calls, not the items.
    workers = session.workers
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=desc) as pool:
        pending: dict[Future[R], int] = {}
        while True:
            # No new item once one has failed: the stage stops after the running items finish.
            while failure is None and len(pending) < workers * (1 + AHEAD):
                following = next(queued, None)
                if following is None:
                    break
                index, item = following
                pending[pool.submit(copy_context().run, ranked, index, item)] = index
            if not pending:
                break
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                index = pending.pop(future)
                if future.cancelled():
                    continue
                error = future.exception()
                if error is None:
                    results[index] = future.result()
                elif not isinstance(error, ReplayMissError) and failure is None:
                    failure = error
                    for other in pending:
                        other.cancel()
    if failure is not None:
        raise failure
    session.raise_for_misses()
    return [results[i] for i in sorted(results)]
