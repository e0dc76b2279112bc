"""DVC's run-cache look-up, refused before it hashes every dependency of a stage it refuses anyway.

Before DVC runs a stage that changed, it asks its run-cache whether an earlier run with these
dependencies left outputs to check out instead (dvc.stage.cache.StageCache.restore). It first asks
whether the stage can be looked up at all (`_can_hash`): it hashes every dependency, and only then
looks at the outputs, refusing any stage with a `persist` output. Every output of every judgeloop
stage is `persist` (dvc.yaml: a failed run keeps the last good outputs), so each look-up hashed all
of the stage's dependencies for nothing: 2-10 ms of CPU a stage in this repository (issue 31;
bench/README.md, "heads-sync"). DVC's `--no-run-cache` does not spare it: in DVC 3.67 `restore`
asks `_can_hash` before it reads that flag. And nothing DVC keeps is at stake: it saves a run-cache
entry only for a stage whose outputs it caches (Stage.run), and ours are `cache: false`.

`outputs_first()` makes `_can_hash` answer from the outputs first, for the time of the `with`: a
stage with a `persist` output is refused at once, which is DVC's own answer for it; any other stage
is asked of DVC's `_can_hash` as it is. The dependencies are still hashed, as before, where DVC
records them (after a run, into dvc.lock).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def outputs_first() -> Iterator[None]:
    from dvc.stage import cache

    can_hash = cache._can_hash

    def persist_refused(stage: Any) -> bool:
        if any(out.persist for out in stage.outs):  # DVC's answer, whatever the dependencies hash to
            return False
        answer: bool = can_hash(stage)
        return answer

    cache._can_hash = persist_refused
    try:
        yield
    finally:
        cache._can_hash = can_hash
