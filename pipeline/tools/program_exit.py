"""The judgeloop program's exit after a command that has closed everything it opened: without the
interpreter's teardown, which frees every object and module one by one (DVC's 750 modules and its
index after `judgeloop repro`: 0.1-0.5 s, bench/README.md, issue 31), as a stage's process leaves
(stages/__main__.py) and a warm stage's (stages/zygote.py): by the same exit, pipeline.fast_exit.

A command says so (`allow`) once DVC has run and it has closed its repository, the warm process
and its files; the program's entry (pipeline.tools.cli's `program`) then leaves by `leave`: the
threads joined, atexit's functions run, the streams flushed, and out with the status, which is all
of the interpreter's exit that a program sees: 120 where a stream's flush fails (stdout a pipe
whose reader has gone), as Python's own exit (Py_FinalizeEx) gives. A command that fails, or never
allows it, exits as Python does; so does any command run inside another program (click's test
runner, a notebook), which never reaches `program`, and any Python without the private functions
the fast exit calls.
"""

from __future__ import annotations

from pipeline.fast_exit import leave_now

_allowed = False


def allow() -> None:
    """This command has closed everything it opened: the program may leave without the teardown."""
    global _allowed
    _allowed = True


def leave(done: SystemExit) -> None:
    """Leave as `done` asks: by the fast exit after a successful command that allowed it, else (or
    on a Python without the fast exit's private steps) as Python does, re-raising `done`."""
    if _allowed and done.code in (0, None):
        leave_now(0)
    raise done
