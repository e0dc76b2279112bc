"""params.yaml and the data files read through input_files (labels, catalogs, ratings, RAG rows,
listening requests, SummEval's annotations) where something other than a regular file stands: a
folder, a pipe, a device. Each is refused naming the file and the fix, never a traceback or a wait.

Found by redteam4: params.yaml was looked at (stat) and then read through its path, unbounded, so a
params.yaml that is a link to /dev/zero (a link is what git can hold) read until the memory ran out,
a pipe waited for a writer for good, and a folder gave IsADirectoryError's traceback; the data
files were opened through their path after an is_file() look, so a pipe put in the place after the
look waited for a writer for good, and a folder gave IsADirectoryError's traceback.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

import pytest

from pipeline.data import input_files
from pipeline.errors import ConfigError, InputError
from pipeline.llm.settings import read_params_file


@contextlib.contextmanager
def _no_wait_for_good(seconds: int = 60) -> Iterator[None]:
    """A read that waits for a writer for good fails the test instead of hanging the suite (a bound
    on a hang, far above any read of a small file: no timing is asserted)."""

    def stuck(signum: int, frame: FrameType | None) -> None:
        raise AssertionError(f"still reading after {seconds} s: it waits for good")

    old = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _a_folder(path: Path) -> str:
    path.mkdir()
    return "a folder"


def _a_pipe(path: Path) -> str:
    os.mkfifo(path)
    return "a pipe"


def _a_link_to_dev_zero(path: Path) -> str:
    path.symlink_to("/dev/zero")
    return "a device"


_NOT_FILES: dict[str, Callable[[Path], str]] = {
    "a folder": _a_folder,
    "a pipe": _a_pipe,
    "a link to /dev/zero": _a_link_to_dev_zero,
}


@pytest.mark.parametrize("what", sorted(_NOT_FILES))
def test_a_params_file_that_is_not_a_file_is_refused_naming_it(tmp_path: Path, what: str) -> None:
    path = tmp_path / "params.yaml"
    kind = _NOT_FILES[what](path)
    with _no_wait_for_good(), pytest.raises(ConfigError, match=rf"params\.yaml: it is {kind}, not a file"):
        read_params_file(path, environ={})


@pytest.mark.parametrize("what", sorted(_NOT_FILES))
def test_a_data_file_that_is_not_a_file_is_refused_naming_it(tmp_path: Path, what: str) -> None:
    """As a stage meets it where the file was replaced after its reader's is_file() look."""
    path = tmp_path / "labels.csv"
    kind = _NOT_FILES[what](path)
    with _no_wait_for_good(), pytest.raises(InputError, match=rf"labels\.csv: it is {kind}, not a file"):
        input_files.read_text(path, "labels.csv")
