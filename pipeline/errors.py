"""Every error judgeloop raises on purpose.

    JudgeloopError                  base; a click.ClickException, so the CLI prints it plainly
    ├── ConfigError                 params.yaml or an environment variable is wrong
    ├── InputError                  a data file is unreadable; names the file, the line and the fix
    ├── UnsafeNameError             a name that becomes a path (a stage, from the command line or a
    │                               file) is not a plain name, or its path leads out of its folder
    ├── UnwritableTextError         text to be written holds a lone surrogate, which no UTF-8 file can
    │                               hold: refused, the old file kept (every reader refuses it first)
    ├── BackendError                a model call failed
    │   ├── TransientBackendError   worth retrying: 429, 503, 500, an error line mid-stream
    │   │   ├── ConnectionFaultError  the server did not answer: refused or reset connection,
    │   │   │                       connect or read timeout, a connection dropped mid-reply
    │   │   └── EmptyReplyError     a 200 whose body has no message or no content: a protocol error,
    │   │       │                   retried like a transient fault, never stored or recorded
    │   │       └── UnreadableReplyError  a reply holding a lone surrogate, which no record can hold
    │   ├── ServerDownError         one call used up its retries on connection faults: the server's
    │   │                           circuit breaker opened, and every other call to it stops at once
    │   ├── ModelNotFoundError      404: the model is not on the server (message says how to pull it)
    │   ├── BadRequestError         400: the server rejected the request as malformed
    │   ├── PromptTruncatedError    the prompt did not fit the context window; the reply is not trusted.
    │   │                           The session records it as the call's refusal (llm.too_long:
    │   │                           unscored: the item unscored, counted) or stops the stage (fail)
    │   └── ModelChangedError       the model's weights digest changed during the run: the stage stops,
    │                               and nothing more is stored under the old digest
    └── CacheError                  the call cache or the recordings
        ├── ReplayMissError         replay mode met a call that was never recorded (one call)
        ├── ReplayIncompleteError   a stage finished with replay misses (lists every missing call)
        └── CorruptRecordError      a stored record is damaged, edited, unreadable, or not ours (a
            │                       pickle, a foreign key): refused, never executed or served
            └── LockMismatchError   a stage's recording does not match its entry in dvc.lock: edited
                                    after it was locked; refused until restored or re-locked

Errors are never cached: only a successful reply becomes a record, or the refusal of a prompt too
long for the context window (pipeline.llm.asking), which the same model and window always repeat.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from pipeline.llm.redact import redact
from pipeline.llm.terminal import guarded

if TYPE_CHECKING:
    from pipeline.llm.types import CallContext


class JudgeloopError(click.ClickException):
    """Base of every error judgeloop raises on purpose. Its message never carries a server URL's
    credentials (pipeline.llm.redact): whatever quoted them, they are masked here. Nor a terminal
    escape: what it quotes of a record (a key, a stage name, a reply) is shown escaped
    (pipeline.llm.terminal), so an error printed by any command cannot act on the terminal."""

    def __init__(self, message: str) -> None:
        super().__init__(guarded(redact(message)))


class ConfigError(JudgeloopError):
    pass


class UnsafeNameError(JudgeloopError):
    pass


class UnwritableTextError(JudgeloopError):
    pass


class InputError(JudgeloopError):
    def __init__(self, path: str, line: int | None, problem: str, fix: str) -> None:
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {problem}. Fix: {fix}")
        self.path, self.line, self.problem, self.fix = path, line, problem, fix


class BackendError(JudgeloopError):
    pass


class TransientBackendError(BackendError):
    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after  # seconds the server asked us to wait (Retry-After), if it did


class EmptyReplyError(TransientBackendError):
    pass


class UnreadableReplyError(EmptyReplyError):
    """A reply holding a lone surrogate (pipeline.llm.bounds.surrogate_problem), which no record can
    hold: a failed call like an empty reply, retried, never stored or recorded, counted with them."""


class ConnectionFaultError(TransientBackendError):
    pass


class ServerDownError(BackendError):
    pass


class ModelNotFoundError(BackendError):
    pass


class BadRequestError(BackendError):
    pass


class PromptTruncatedError(BackendError):
    def __init__(self, message: str, *, item: str | None = None) -> None:
        super().__init__(message)
        self.item = item  # the item whose prompt it was, once the session knows it


class ModelChangedError(BackendError):
    pass


class CacheError(JudgeloopError):
    pass


class ReplayMissError(CacheError):
    def __init__(self, key: str, context: CallContext | None) -> None:
        where = context.describe() if context is not None else "no context"
        super().__init__(f"replay mode: call {key} ({where}) is not recorded")
        self.key, self.context = key, context


class ReplayIncompleteError(CacheError):
    def __init__(
        self,
        stage: str,
        misses: Sequence[ReplayMissError],
        damaged: Sequence[str] = (),
        cause: str | None = None,
    ) -> None:
        """cause: why, when known, with its fix (pipeline.llm.why_missing: the stage never ran under
        these params, or it did and these calls are new)."""
        lines = [f"  - {m.context.describe() if m.context else '?'}  key {m.key}" for m in misses]
        left_out = "".join(f"\nLeft out, so not searched: {reason}" for reason in damaged)
        fix = cause or (
            "Fix: run with JUDGELOOP_CACHE_MODE=auto where the model is available, "
            "or fetch the collaborator's recordings/ folder."
        )
        super().__init__(
            f"replay mode: stage '{stage}' needs {len(misses)} call(s) that are not recorded:\n"
            + "\n".join(lines)
            + left_out
            + "\n"
            + fix
        )
        self.stage, self.misses = stage, list(misses)


class CorruptRecordError(CacheError):
    pass


class LockMismatchError(CorruptRecordError):
    pass
