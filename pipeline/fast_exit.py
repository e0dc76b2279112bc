"""The one fast exit of every judgeloop process: out by os._exit, without the interpreter's teardown
(which frees every object and module one by one: 60-80 ms after a stage of the paper's scale,
0.1-0.5 s after `judgeloop repro`; bench/README.md, issue 31), but with all of Python's exit that a
program sees, in Py_FinalizeEx's and Py_RunMain's order and with their status:

- the threads joined (threading._shutdown), atexit's functions run (logging.shutdown among them);
- both streams flushed: a closed or missing one skipped, a failure of stdout's told on stderr and of
  stderr's silently, and either makes the status 120 (FINALIZE_FAILED), whatever it was;
- after an uncaught KeyboardInterrupt, the end by SIGINT (130 where that does not end the process).

Its callers: the judgeloop program (pipeline.tools.program_exit), a stage's process after success
(stages/__main__.py) and a warm stage's forked process (stages/zygote.py). The two private steps are
looked up first: on a Python without them `leave_now` returns, doing nothing, and the caller exits
Python's own way. Only the standard library is imported here, and nothing that Python has not loaded
at its start (the stage's start and the warm process's import before its fork depend on it).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading

TYPE_CHECKING = False  # typing itself is not imported: 3 ms on every stage's start
if TYPE_CHECKING:
    from typing import TextIO

# Python's exit status where the interpreter's exit fails (a stream's flush): Py_RunMain's.
FINALIZE_FAILED = 120


def leave_now(status: int, *, interrupted: bool = False) -> None:
    """Leave with `status` (after an uncaught KeyboardInterrupt where `interrupted`) as Python's exit
    would, less the teardown; returns only on a Python without the private steps."""
    shutdown = getattr(threading, "_shutdown", None)
    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
    if not (callable(shutdown) and callable(run_exitfuncs)):
        return
    shutdown()  # joins the threads, as Py_FinalizeEx does first
    run_exitfuncs()
    flushed = [_flushed(stream) for stream in (sys.stdout, sys.stderr)]  # both, whatever the first
    if interrupted:  # Py_RunMain's exit_sigint, after the flush: the status the caller's shell sees
        import signal

        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        os._exit(128 + signal.SIGINT)
    os._exit(status if all(flushed) else FINALIZE_FAILED)


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
    try:
        import traceback  # only here: a failed flush is rare, and the import costs every stage's start

        sys.stderr.write("Exception ignored on flushing sys.stdout:\n")
        sys.stderr.write("".join(traceback.format_exception_only(failed)))
    except Exception:  # stderr broken too: nothing more to tell
        return
