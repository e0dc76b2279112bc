"""What every fuzz test shares: how many examples, the time bound, the property, and the inputs.

The property of every reader: given any bytes, it returns a correct result or raises a clear
judgeloop error (pipeline.errors.JudgeloopError, a click.ClickException); never another exception's
traceback, never a hang (each example is time-bound), never a file written outside the project.

How many examples per reader: JUDGELOOP_FUZZ_EXAMPLES (`make fuzz` sets 10,000); `make test` runs
the short profile, DEFAULT_EXAMPLES each. Inputs are of three kinds, mixed: arbitrary bytes,
arbitrary Unicode text (every line-break class, controls, surrogates written as WTF-8), and real
files (the committed params.yaml, dvc.lock, recordings, data) with random edits spliced in, which
reach far deeper into a parser than random bytes do.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import click
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]
DEFAULT_EXAMPLES = 50
EXAMPLES = int(os.environ.get("JUDGELOOP_FUZZ_EXAMPLES", DEFAULT_EXAMPLES))
TIME_BOUND_S = float(os.environ.get("JUDGELOOP_FUZZ_TIME_BOUND_S", "10"))  # CPU seconds per example

_settings = settings(
    max_examples=EXAMPLES,
    deadline=None,  # the time bound below is the hang check; a slow machine is not a failure
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
        HealthCheck.large_base_example,
    ],
)


# With JUDGELOOP_FUZZ_PROGRESS=file, each test appends its count of examples run so far every
# PROGRESS_EVERY examples (and at its end), so that a long run stopped early still says how far it got.
PROGRESS = os.environ.get("JUDGELOOP_FUZZ_PROGRESS")
PROGRESS_EVERY = 250
_runs: dict[str, int] = {}


def _note(name: str, final: bool = False) -> None:
    if PROGRESS and (final or _runs[name] % PROGRESS_EVERY == 0):
        with open(PROGRESS, "a", encoding="utf-8") as out:
            out.write(f"{name} {_runs[name]}{' done' if final else ''}\n")


def fuzz(test: Callable[..., None]) -> Callable[..., None]:
    """The fuzz profile, and a count of the examples each test runs (outermost, above @given)."""
    return _counted(test, _settings)


def fuzz_unshrunk(test: Callable[..., None]) -> Callable[..., None]:
    """`fuzz` without shrinking: for a test expected to fail (xfail) until another branch is merged,
    whose failure would otherwise be shrunk at length in every `make test`."""
    return _counted(test, settings(_settings, phases=[Phase.explicit, Phase.reuse, Phase.generate]))


def _counted(test: Callable[..., None], profile: settings) -> Callable[..., None]:
    inner = test.hypothesis.inner_test  # type: ignore[attr-defined]
    name = test.__name__

    @functools.wraps(inner)
    def counted(*args: Any, **kwargs: Any) -> None:
        _runs[name] = _runs.get(name, 0) + 1
        _note(name)
        inner(*args, **kwargs)

    test.hypothesis.inner_test = counted  # type: ignore[attr-defined]
    configured: Callable[..., None] = profile(test)

    @functools.wraps(configured)
    def reported(*args: Any, **kwargs: Any) -> None:
        try:
            configured(*args, **kwargs)
        finally:
            if name in _runs:
                _note(name, final=True)

    return reported


class Hang(BaseException):
    """A reader that did not answer within the bound. A BaseException, so that no reader's own
    `except Exception` can swallow it."""


@contextlib.contextmanager
def time_bound(seconds: float = TIME_BOUND_S) -> Iterator[None]:
    def ring(signum: int, frame: Any) -> None:
        raise Hang(f"no answer within {seconds} s of CPU time")

    # CPU time (ITIMER_PROF), not wall time: on a loaded machine a reader may wait for the CPU far
    # longer than it works, and a hang is work that does not end.
    previous = signal.signal(signal.SIGPROF, ring)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def clear_or_correct(read: Callable[[], T]) -> T | click.ClickException:
    """What `read` returns, or the clear error it raised; any other exception fails the example."""
    with time_bound():
        try:
            return read()
        except click.ClickException as exc:  # JudgeloopError and every error the CLI prints plainly
            assert exc.message.strip(), "an error without a message"
            return exc


def keys_shown(stage: Path) -> None:
    """A stage's keys as a lookup elsewhere first reads them (pipeline.llm.recordings.stage_keys),
    which must never raise, and must show every key its verified index serves: a key it left out
    would be passed over in a lookup that reading the recording whole would answer."""
    from pipeline.llm.recordings.stage_index import StageIndex, index_stage
    from pipeline.llm.recordings.stage_keys import recorded_keys

    with time_bound():
        shown = recorded_keys(stage)
    index = clear_or_correct(lambda: index_stage(stage))
    if shown is not None and isinstance(index, StageIndex):
        assert set(index.at) <= set(shown), "a key the verified recording serves is not shown"


def only_inside(sandbox: Path, project: Path) -> None:
    """Nothing was written beside the project, in the sandbox that holds it."""
    assert sorted(p.name for p in sandbox.iterdir()) == [project.name], sorted(sandbox.iterdir())


# -- inputs ---------------------------------------------------------------------------------------


# Every character str.splitlines treats as a line break, and others that break parsers or terminals.
def laid_out(folder: Path, files: Mapping[str, bytes]) -> Path:
    """`folder` made anew (an earlier example's files gone: a fuzz test's sandbox is kept across its
    examples), holding `files` by their paths under it; `folder` returned."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for name, content in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(content)
    return folder


MEMO_KINDS = ["private", "group-writable", "a link"]  # how place_memo puts a memo file in place


def place_memo(memo_file: Path, kind: str, data: bytes) -> None:
    """`data` as a private memo file (pipeline.llm.private_memo): one only its owner may read and
    write, one its group may write, or a link (beside it, "linked-memo") to one it owns."""
    linked = memo_file.with_name("linked-memo")
    for stale in (memo_file, linked):
        if stale.is_symlink() or stale.exists():
            stale.unlink()
    target = linked if kind == "a link" else memo_file
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(data)
    if kind == "group-writable":
        os.chmod(memo_file, 0o660)
    if kind == "a link":
        memo_file.symlink_to(target.name)


LINE_BREAKS = ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
TOKENS = [
    *LINE_BREAKS,
    "\x00",
    "\x1b[2J",
    "\ufeff",
    "\u200b",
    "\u202e",
    "\U000e0041",
    "\ud800",
    "{",
    "}",
    "[",
    "]",
    '"',
    "'",
    ":",
    ",",
    "\\",
    "\\u0000",
    "\\ud800",
    "null",
    "true",
    "1e999",
    "-0",
    "&a ",
    "*a",
    "<<: *a",
    "- ",
    "  ",
    "\t",
    "? ",
    "!!python/object:os.system",
    "---",
    "...",
    "%YAML 1.1",
    "[" * 200,
    "[" * 1200,  # past libyaml's own nesting limit (1,000), where PyYAML's composer recursed
    "{" * 100,
    '{"a":' * 80,
    "- " * 80,
]


def encoded(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # a lone surrogate becomes bytes that are not UTF-8


texts = st.text(alphabet=st.characters(codec=None), max_size=400)
mixed_texts = st.lists(st.one_of(texts, st.sampled_from(TOKENS)), max_size=12).map("".join)


@st.composite
def edited(draw: st.DrawFn, seed: bytes) -> bytes:
    """`seed` with a few random edits: a slice deleted or repeated, a token or random text spliced in."""
    data = seed
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        cut = draw(st.integers(0, min(40, len(data) - at)))
        kind = draw(st.sampled_from(["insert", "delete", "replace", "repeat"]))
        if kind == "repeat":
            data = data[:at] + data[at : at + cut] * draw(st.integers(2, 50)) + data[at:]
        else:
            piece = b"" if kind == "delete" else encoded(draw(mixed_texts))
            data = data[:at] + piece + data[at + (cut if kind != "insert" else 0) :]
    return data


def inputs(*seeds: bytes) -> st.SearchStrategy[bytes]:
    """Bytes for a reader: random, random text, or one of `seeds` edited (most often)."""
    edits = [edited(seed) for seed in seeds]
    return st.one_of(st.binary(max_size=2000), mixed_texts.map(encoded), *edits, *edits)


@st.composite
def edited_or_swapped(draw: st.DrawFn, seed: bytes, old: bytes, odd: list[bytes], lead: bytes = b"") -> bytes:
    """`seed` (a committed file) edited at random, or with its first `lead + old` swapped for `lead`
    and one of `odd` (an odd path, say)."""
    if draw(st.booleans()):
        return draw(inputs(seed))
    return seed.replace(lead + old, lead + draw(st.sampled_from(odd)), 1)


def committed(relative: str) -> bytes:
    return (ROOT / relative).read_bytes()
