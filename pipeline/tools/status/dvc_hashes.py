"""Each path DVC hashes for `judgeloop status` hashed once, however many stages name it (issue 33).

`dvc status` hashes every dep and out of every stage on its own: a folder that three stages
depend on (the paper's `${data.transcripts}`, read by assess, judge and refine) is walked three
times, and a file one stage writes and the next reads (`outputs/paper/assessments.jsonl`,
`recordings/judge`) twice. DVC's state database spares it re-reading a file's bytes, but each
walk still costs DVC about 0.1-0.2 ms a folder and a file (its .dvcignore trie, a state look-up
per folder): at a million calls, with a folder per interview, that was most of the status.

Within one status, under DVC's repo lock, a path's hash is the same whichever stage asks: the same
path of the workspace's own filesystem (not an import's), the same hash name, the same .dvcignore.
So the first computation is kept and handed to the others. Only the hashes DVC computes as a dry
run are shared (deps, and outs with `cache: false`), where computing one has no side effect; a
cached out is hashed by DVC as it always is, since that also puts its files into DVC's cache.
Nothing DVC compares changes: each stage still checks each of its deps and outs against its own
entry in dvc.lock.

A folder's hash is first asked of `tree_hash.folder_hash_meta`, which builds the hash DVC would from
one plain walk and DVC's state database, or gives no answer where anything is unusual; then DVC's.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pipeline.tools.status.tree_hash import folder_hash_meta


@contextmanager
def one_hash_per_path() -> Iterator[None]:
    """While open, DVC's Output hashes each (workspace, path, hash name) once, for outputs that it
    hashes without caching; with a DVC whose Output lacks the method, nothing is shared."""
    try:
        from dvc.output import Output
    except ImportError:
        yield
        return
    original = getattr(Output, "_get_hash_meta", None)
    if original is None:
        yield
        return
    found: dict[tuple[Any, ...], Any] = {}
    owner = threading.get_ident()  # another thread's DVC (a test's, say) hashes as it always does

    def shared(self: Any) -> Any:
        # The workspace's own paths only: an import's dep reads another repository's filesystem.
        own = self.repo is not None and self.fs is self.repo.fs
        if self.use_cache or not own or threading.get_ident() != owner:
            return original(self)
        key = (self.fs_path, self.hash_name, id(self.dvcignore), id(self.repo))
        if key not in found:
            found[key] = folder_hash_meta(self) or original(self)
        return found[key]

    Output._get_hash_meta = shared
    try:
        yield
    finally:
        Output._get_hash_meta = original
