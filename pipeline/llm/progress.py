"""What a stage says while it runs: a line when it starts, a live bar on a terminal, a line when it ends.

    progress = StageProgress("judge", Expected(calls=12, model_calls=4, exact=True, items=3))
    progress.start()            # judge: 12 calls expected (8 recorded, 4 for the model), 3 items
    session.observe_served(progress.call)
    ...
    progress.finish("0 of 12 judgements unscored")
    # judge: done in 41.0 s: 12 calls, 8 hits, 4 misses sent to the model (cache mode auto); 0 of 12 ...

The expected counts are `judgeloop status`'s (the stage runner dry-runs the stage first, as status
does). On a terminal the bar shows calls done of expected, hits, the model's pace and the time
left, estimated from the model calls alone (hits are near instant); in a log or a pipe there is no
bar (each redraw would be a line), only the two lines, so a log says per stage what was expected
and what happened. Everything goes to stderr, beside DVC's own messages.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from tqdm import tqdm

    from pipeline.llm.records import RecordedCall, ServedCall


@dataclass(frozen=True)
class Expected:
    """The calls a stage is expected to make: all of them, and of those the ones not recorded
    (for the model); exact False: a lower bound (some calls depend on replies not known yet)."""

    calls: int
    model_calls: int
    exact: bool
    items: int

    def describe(self) -> str:
        bound = "" if self.exact else "at least "
        recorded = self.calls - self.model_calls
        split = f"{recorded} recorded, {bound}{self.model_calls} for the model"
        return f"{bound}{self.calls} calls expected ({split}), {self.items} items"


def _is_terminal(stream: TextIO) -> bool:
    """tqdm's own test of a stream (disable=None): a bar only on a terminal."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def clock(seconds: float) -> str:
    """1:05:03, 4:02, or 12.3 s."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class StageProgress:
    """One stage's start line, live bar (on a terminal) and end line. `call` is thread-safe: the
    session calls it for every call, from the worker that made it."""

    def __init__(
        self,
        stage: str,
        expected: Expected | None,
        *,
        mode: str = "auto",
        stream: TextIO | None = None,
        live: bool | None = None,
        unknown: str = "calls not predicted",
        started: float | None = None,
    ) -> None:
        self.stage, self.expected, self.mode, self.unknown = stage, expected, mode, unknown
        self.stream = stream or sys.stderr
        # None: a bar only on a terminal (tqdm's own test of the stream).
        self.live = live
        self.calls = self.hits = self.model_calls = 0
        self.model_seconds = 0.0
        # The wall time counts from `started` (time.monotonic(); e.g. before the dry run), the
        # model's pace from start().
        self._started = time.monotonic() if started is None else started
        self._last_model_call = self._started
        self._lock = threading.Lock()
        self._bar: tqdm[Any] | None = None

    def start(self) -> None:
        """The start line, and on a terminal the bar. The stage may have begun its calls already
        (stages.runner starts them while its dry run goes on): those are counted, and the model's
        pace runs from the first."""
        what = self.expected.describe() if self.expected else self.unknown
        print(f"{self.stage}: {what}", file=self.stream, flush=True)
        with self._lock:
            if not self.model_calls:
                self._last_model_call = time.monotonic()
        if not (self.live if self.live is not None else _is_terminal(self.stream)):
            return  # no bar in a log or a pipe (nor tqdm imported, a stage's largest import)
        from tqdm import tqdm

        with self._lock:
            self._bar = self._new_bar(tqdm)

    def _new_bar(self, tqdm: Any) -> Any:
        return tqdm(
            initial=self.calls,
            total=max(self.expected.calls, self.calls) if self.expected else None,
            desc=self.stage,
            unit="call",
            file=self.stream,
            disable=False,
            dynamic_ncols=True,
            leave=False,
            bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} calls [{elapsed}{postfix}]",
        )

    def call(self, call: RecordedCall | ServedCall) -> None:
        with self._lock:
            self.calls += 1
            if call.cache_hit:
                self.hits += 1
            else:
                self.model_calls += 1
                now = time.monotonic()
                self.model_seconds += now - self._last_model_call
                self._last_model_call = now
            bar = self._bar
            if bar is None or bar.disable:
                return
            if bar.total is not None and self.calls > bar.total:
                bar.total = self.calls  # more calls than the lower bound said
            bar.set_postfix_str(self._postfix(), refresh=False)
            bar.update()

    def refresh(self) -> None:
        """Redraw the bar now (on its own it redraws at most ten times a second)."""
        with self._lock:
            if self._bar is not None and not self._bar.disable:
                self._bar.set_postfix_str(self._postfix(), refresh=False)
                self._bar.refresh()

    def eta(self) -> float | None:
        """Seconds left: the model calls still expected, each as long as those so far took."""
        if self.expected is None or not self.model_calls:
            return None
        left = max(0, self.expected.model_calls - self.model_calls)
        return left * self.model_seconds / self.model_calls

    def _postfix(self) -> str:
        parts = [f"{self.hits} hits"]
        if self.model_calls:
            pace = self.model_seconds / self.model_calls
            parts.append(f"{self.model_calls} to the model, {pace:.1f} s/call")
        eta = self.eta()
        if eta is not None:
            parts.append(f"ETA {clock(eta)}")
        return ", ".join(parts)  # tqdm puts ", " before it

    def close(self) -> None:
        """Take the bar off the terminal (finish does, and prints the end line)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def finish(self, outcome: str | None = None, *, failed: bool = False) -> str:
        """The end line (also returned): what happened, and `outcome` (e.g. how many are unscored)."""
        self.close()
        took = clock(time.monotonic() - self._started)
        how = f"failed after {took}" if failed else f"done in {took}"
        line = (
            f"{self.stage}: {how}: {self.calls} calls, {self.hits} hits, "
            f"{self.model_calls} misses sent to the model (cache mode {self.mode})"
        )
        if outcome:
            line += f"; {outcome}"
        print(line, file=self.stream, flush=True)
        return line
