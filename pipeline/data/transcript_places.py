"""Where each transcript of an index lies, packed: about 150 bytes a transcript, not 1.8 kB (issue 33).

An index of transcripts (pipeline.data.transcripts.Transcripts) holds, for each item, where to read
it again: its file, the file's size and modification time when it was read, and for a JSONL line its
number and byte span. As a Path and a dataclass a transcript, with the name shown in messages, that
was about 1.8 kB an item (tracemalloc, 10k interviews of one file each), held through every stage's
dry run and run: 1.8 GB at a million interviews. Here a transcript's file is its name under the
folder searched (one str, the same object for the transcripts of one JSONL file), the numbers lie in
arrays, and the name shown is made from the folder's when that gives the same text (it is kept as it
is where it does not: a symlink, a folder outside the project).

The files are found as pipeline.data.transcripts always found them (`found`): the folder's files by
name, then those one folder down, by folder and name; a name each, never a Path each (a million
Paths were about 0.5 GB while the index was made).
"""

from __future__ import annotations

import os
import warnings
from array import array
from collections.abc import Callable, Iterable
from pathlib import Path

from pipeline.data.input_files import InputWarning, shown_path
from pipeline.errors import InputError

SEARCHED = ("*_TRANSCRIPT.csv", "*/*_TRANSCRIPT.csv", "*.txt", "*.jsonl")
_DAIC = "_transcript.csv"
_NONE = -1  # a line's number or span that is not there (a file of one transcript)


def _wanted(name: str, nested: bool) -> bool:
    lower = name.lower()
    return lower.endswith(_DAIC) or (not nested and lower.endswith((".txt", ".jsonl")))


def _sorted_names(folder: Path) -> list[str]:
    """The folder's entries' names, sorted as its Paths sort (within one folder: by name)."""
    return sorted(os.listdir(folder))


def found(path: Path, root: Path) -> list[str]:
    """The transcript files under `path`, each as its name under it ("" for `path` itself), in the
    order they are read; a macOS metadata file is skipped with a warning."""
    shown = shown_path(path, root)
    if not path.exists():
        fix = "point data.transcripts in params.yaml at one"
        raise InputError(shown, None, "no such file or folder", fix)
    if path.is_file():
        if path.name.startswith("._") or path.suffix.lower() not in (".csv", ".txt", ".jsonl"):
            raise InputError(shown, None, "not a transcript file", "use NNN_TRANSCRIPT.csv, *.txt or *.jsonl")
        return [""]
    top = _sorted_names(path)
    folders = [name for name in top if (path / name).is_dir()]
    chosen: list[str] = []
    for name in top:
        _choose(path, root, name, False, chosen)
    for folder in folders:
        for name in _sorted_names(path / folder):
            _choose(path, root, f"{folder}/{name}", True, chosen)
    if not chosen:
        problem = "no transcripts in this folder; looked for " + ", ".join(SEARCHED)
        raise InputError(shown, None, problem, "add transcripts in one of those layouts, or point elsewhere")
    return chosen


def _choose(path: Path, root: Path, relative: str, nested: bool, chosen: list[str]) -> None:
    name = relative.rsplit("/", 1)[-1]
    candidate = path / relative
    if not candidate.is_file():
        return
    if name == ".DS_Store" or (name.startswith("._") and _wanted(name[2:], nested)):
        message = f"{shown_path(candidate, root)}: skipped a macOS metadata file, not a transcript"
        warnings.warn(message, InputWarning, stacklevel=4)  # the caller of index_transcripts
    elif not name.startswith("._") and _wanted(name, nested):
        chosen.append(relative)


class Places:
    """A row a transcript: its file (a name under `folder`), stamp, and JSONL line and byte span."""

    def __init__(self, folder: Path, root: Path) -> None:
        self.folder, self.root = folder, root
        shown = shown_path(folder, root)
        self._prefix = "" if shown == "." else f"{shown}/"  # a file's name shown, but for its name
        self._files: list[str] = []  # by row: the file's name under `folder`
        self._shown: dict[int, str] = {}  # by row: a name shown that is not the folder's and the file's
        self._numbers = array("q")  # by row: size, mtime_ns, line, span's start, span's size

    def __len__(self) -> int:
        return len(self._files)

    def add(
        self, file: str, shown: str, stamp: tuple[int, int], line: int | None, span: tuple[int, int] | None
    ) -> None:
        if shown != self._shown_as(file):
            self._shown[len(self._files)] = shown
        self._files.append(file)
        start, size = (_NONE, _NONE) if span is None else span
        self._numbers.extend((*stamp, _NONE if line is None else line, start, size))

    def _shown_as(self, file: str) -> str:
        return f"{self._prefix}{file}" if file else self._prefix.removesuffix("/") or "."

    def path(self, row: int) -> Path:
        file = self._files[row]
        return self.folder / file if file else self.folder

    def shown(self, row: int) -> str:
        """The file's name in messages, as shown_path gave it when the row was added."""
        held = self._shown.get(row)
        return self._shown_as(self._files[row]) if held is None else held

    def stamp(self, row: int) -> tuple[int, int]:
        return self._numbers[5 * row], self._numbers[5 * row + 1]

    def line(self, row: int) -> int | None:
        line = self._numbers[5 * row + 2]
        return None if line == _NONE else line

    def span(self, row: int) -> tuple[int, int] | None:
        start, size = self._numbers[5 * row + 3], self._numbers[5 * row + 4]
        return None if start == _NONE else (start, size)

    def rows(self, rows: Iterable[int]) -> Places:
        """These rows, in this order, as a table of their own."""
        taken = Places.__new__(Places)
        taken.folder, taken.root, taken._prefix = self.folder, self.root, self._prefix
        taken._files, taken._shown, taken._numbers = [], {}, array("q")
        for row in rows:
            if row in self._shown:
                taken._shown[len(taken._files)] = self._shown[row]
            taken._files.append(self._files[row])
            taken._numbers.extend(self._numbers[5 * row : 5 * row + 5])
        return taken

    def first(self, wanted: Callable[[int], bool]) -> int | None:
        """The first row `wanted` takes (an error's look back: rare)."""
        return next((row for row in range(len(self._files)) if wanted(row)), None)
