"""Run one stage's items side by side, as many as the session's workers.

Results come back in the items' order whatever order they finished in. A replay miss stops only
its own item (later calls of that item depend on the missing reply); the stage then fails listing
every missing call. Any other error stops the stage after the running items finish: every call
that completed is already in the cache, so a rerun resumes without repeating it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TypeVar

from pipeline.errors import ReplayMissError
from pipeline.llm.session import LLMSession

T = TypeVar("T")
R = TypeVar("R")


def run_items(session: LLMSession, items: Sequence[T], work: Callable[[T], R], desc: str) -> list[R]:
    results: dict[int, R] = {}
    failure: BaseException | None = None
    # The stage's progress (pipeline.llm.progress) follows the session's calls, not the items.
    with ThreadPoolExecutor(max_workers=session.workers, thread_name_prefix=desc) as pool:
        pending: dict[Future[R], int] = {pool.submit(work, item): i for i, item in enumerate(items)}
        while pending:
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
