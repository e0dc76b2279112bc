"""Closing in steps, none skipped for one that failed (a session's close, a store's).

A session's close writes its recording, then its summary, then releases its backend and its store,
whose close writes the seeds it gathered; a store's close writes those seeds, then closes its two
databases. One step's failure skips no later one: what was finished is still written (a failed run
resumes from the cache without repeating a finished call) and every resource is released. The
first failure is raised after the last step, each later one named in its notes."""

from __future__ import annotations

from collections.abc import Callable


def each_step(*steps: Callable[[], object]) -> None:
    """Each step run in turn, though one before it failed; the first failure raised after the last
    (a later one added to its notes, as "then: ..."). A KeyboardInterrupt or other BaseException
    stops the steps at once, as it would stop any code."""
    first: Exception | None = None
    for step in steps:
        try:
            step()
        except Exception as exc:
            if first is None:
                first = exc
            else:
                first.add_note(f"then: {type(exc).__name__}: {exc}")
    if first is not None:
        raise first
