"""Regular expressions compiled on their first use rather than at import.

The extractor's ~40 patterns cost a stage process 40-50 ms to compile at import (issue 31), and a
stage that only replays its calls, or a report that imports a judge's code for its names, never
matches one. `lazy_compile` takes what `re.compile` takes and gives an object that compiles it the
first time any of its attributes is read (`search`, `finditer`, `pattern`, ...), then hands on the
compiled pattern's: the same matches as the eager pattern, only later.

`compile_all` compiles every pattern made so far at once: a process about to fork workers that each
read replies (the report's two page writers, pipeline.reports.page_shares) compiles them once,
before the fork, rather than once in each worker.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any, cast

_MADE: list[LazyPattern] = []  # every lazy pattern of the process, for compile_all


class LazyPattern:
    """`re.compile(pattern, flags)`, done the first time it is used."""

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._source = (pattern, flags)
        self._compiled: re.Pattern[str] | None = None
        _MADE.append(self)

    def compiled(self) -> re.Pattern[str]:
        """The compiled pattern, compiled now if it was not yet."""
        if self._compiled is None:
            self._compiled = re.compile(*self._source)
        return self._compiled

    def __getattr__(self, name: str) -> Any:
        # Reached only for what the instance does not hold yet: the compiled pattern's attributes,
        # kept on the instance so that later reads find them directly.
        if name.startswith("_"):  # a pattern's own attributes are public; ours are set in __init__
            raise AttributeError(name)
        value = getattr(self.compiled(), name)
        setattr(self, name, value)
        return value

    def __repr__(self) -> str:
        return f"lazy_compile({self._source[0]!r}, {self._source[1]!r})"


def compile_all() -> None:
    """Compile every lazy pattern made so far (each module's, as it was imported). One that does not
    compile is left to fail where it is first used, as it would have."""
    for pattern in _MADE:
        with contextlib.suppress(re.error):
            pattern.compiled()


def lazy_compile(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """A pattern that compiles on first use; typed as the compiled pattern it stands for."""
    return cast("re.Pattern[str]", LazyPattern(pattern, flags))
