"""The judgeloop program's exit after a command that has closed everything it opened: without the
interpreter's teardown, which frees every object and module one by one (DVC's 750 modules and its
index after `judgeloop repro`: 0.1-0.5 s, bench/README.md, issue 31), as a stage's process leaves
(stages/__main__.py) and a warm stage's (stages/zygote.py's _finish, whose steps this takes).

A command says so (`allow`) once DVC has run and it has closed its repository, the warm process
and its files; the program's entry (pipeline.tools.cli's `program`) then leaves by `leave`: the
threads joined, atexit's functions run, the streams flushed, and out with the status, which is all
of the interpreter's exit that a program sees: 120 where a stream's flush fails (stdout a pipe
whose reader has gone), as Python's own exit (Py_FinalizeEx) gives. A command that fails, or never allows it,
exits as Python does; so does any command run inside another program (click's test runner, a
notebook), which never reaches `program`, and any Python without the private functions this calls.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
import traceback
from typing import TextIO

# Python's exit status where the interpreter's exit fails (a stream's flush): Py_RunMain's.
FINALIZE_FAILED = 120

_allowed = False


def allow() -> None:
    """This command has closed everything it opened: the program may leave without the teardown."""
    global _allowed
    _allowed = True


def leave(done: SystemExit) -> None:
    """Leave as `done` asks: by os._exit after a successful command that allowed it, else as
    Python does (re-raising `done`)."""
    # Py_FinalizeEx's first steps, private: a Python without them exits its own way.
    shutdown = getattr(threading, "_shutdown", None)
    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
    if not (_allowed and done.code in (0, None) and callable(shutdown) and callable(run_exitfuncs)):
        raise done
    shutdown()  # joins the threads, as Py_FinalizeEx does first
    run_exitfuncs()
    flushed = [_flushed(stream) for stream in (sys.stdout, sys.stderr)]  # both, whatever the first
    os._exit(0 if all(flushed) else FINALIZE_FAILED)


def _flushed(stream: TextIO | None) -> bool:
    """The stream flushed, or nothing to flush (none, closed), as Py_FinalizeEx's flush_std_files:
    a failure of stdout's is told on stderr, stderr's silently, and either gives FINALIZE_FAILED."""
    try:
        if stream is None or stream.closed:
            return True
    except Exception:  # a stream that cannot say is left, as Python leaves it
        return True
    try:
        stream.flush()
    except Exception as failed:  # told, never raised, as at a normal exit
        if stream is sys.stdout:
            _tell(failed)
        return False
    return True


def _tell(failed: Exception) -> None:
    """Python 3.13's words for it (3.11's and 3.12's name the stream's repr instead)."""
    with contextlib.suppress(Exception):
        sys.stderr.write("Exception ignored on flushing sys.stdout:\n")
        sys.stderr.write("".join(traceback.format_exception_only(failed)))
