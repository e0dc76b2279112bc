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
stage with a `persist` output whose dependencies are all there is refused at once, which is DVC's own
answer for it; any other stage is asked of DVC's `_can_hash` as it is, so that where hashing a
dependency fails (one missing, a broken link) DVC's error is the answer, as it is without judgeloop
(`dvc repro --dry` fails on it). The dependencies are still hashed, as before, where DVC records
them (after a run, into dvc.lock). The patch is DVC's module's for as long as any thread is inside
a `with` (they may leave in any order), and put back when the last leaves.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_lock = threading.Lock()
_inside = 0  # the `with`s entered and not yet left, in every thread
_dvc_can_hash: Callable[[Any], bool] | None = None


def _persist_refused(stage: Any) -> bool:
    if any(out.persist for out in stage.outs) and all(map(_hashed_as_dvc_would, stage.deps)):
        return False  # DVC's answer, whatever the dependencies hash to
    assert _dvc_can_hash is not None
    return _dvc_can_hash(stage)


def _hashed_as_dvc_would(dep: Any) -> bool:
    """Whether DVC's `_can_hash` gets past this dependency without an error: one it does not hash
    (not local, no path), or one that is there to hash (a link to nothing is not: DVC's `exists`
    says it is, and hashing it fails)."""
    return dep.protocol != "local" or not dep.def_path or (os.path.exists(dep.fs_path) and bool(dep.exists))


@contextmanager
def outputs_first() -> Iterator[None]:
    global _inside, _dvc_can_hash
    from dvc.stage import cache

    with _lock:
        if _inside == 0:
            _dvc_can_hash = cache._can_hash
            cache._can_hash = _persist_refused
        _inside += 1
    try:
        yield
    finally:
        with _lock:
            _inside -= 1
            if _inside == 0:
                cache._can_hash = _dvc_can_hash
