"""Two malloc arenas for a process that runs a stage's calls on threads (issue 33).

glibc gives each thread that allocates while another holds an arena an arena of its own, up to
eight per core, and memory freed in one is reused only there. A stage's worker threads (and the
side-by-side pool) each build and drop 20 kB prompts, so a replay's resident memory ratcheted up
stage after stage, freed memory held in arenas no thread would use again: at 2,906 replayed calls,
392 MB of peak resident memory, 256 MB with two arenas, for the same work (the threads take turns
at the interpreter anyway, so they seldom contend for an arena). `MALLOC_ARENA_MAX` in the
environment, when set, is the user's choice and is left alone; on a C library other than glibc
this does nothing.
"""

from __future__ import annotations

import ctypes
import os
import sys

M_ARENA_MAX = -8  # glibc's mallopt parameter
ARENAS = 2
_set = False


def limit_arenas() -> None:
    """At most ARENAS malloc arenas from now on (glibc only, once a process, before its threads)."""
    global _set
    if _set or not sys.platform.startswith("linux") or "MALLOC_ARENA_MAX" in os.environ:
        return
    _set = True
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own C library
    except (OSError, AttributeError):  # not glibc (musl has no arenas to limit)
        return
    mallopt(ctypes.c_int(M_ARENA_MAX), ctypes.c_int(ARENAS))
