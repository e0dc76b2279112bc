"""Where each transcript of an index lies, packed: about 150 bytes a transcript, not 1.8 kB (issue 33).

An index of transcripts (pipeline.data.transcripts.Transcripts) holds, for each item, where to read
it again: its file, the file's identity when it was read (device, inode, size, modification and
change times: pipeline.data.transcript_open), and for a JSONL line its number and byte span. As a
Path and a dataclass a transcript, with the name shown in messages, that was about 1.8 kB an item
(tracemalloc, 10k interviews of one file each), held through every stage's dry run and run: 1.8 GB
at a million interviews. Here a transcript's file is its name under the
folder searched (one str, the same object for the transcripts of one JSONL file), the numbers lie in
arrays, and the name shown is made from the folder's when that gives the same text (it is kept as it
is where it does not: a symlink, a folder outside the project).

The files are found as pipeline.data.transcripts always found them (`found`): the folder's files by
name, then those one folder down, by folder and name; a name each, never a Path each (a million
Paths were about 0.5 GB while the index was made). What each entry is comes with the folder's
listing (os.scandir), so that a link, and only a link, costs a stat and a realpath: a transcript is
read only inside the folder (a link that leads out would put another file's text into prompts and
recordings). The folder itself may be a link; it is where it leads.
"""

from __future__ import annotations

import os
import warnings
from array import array
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

from pipeline.data.input_files import InputWarning, shown_path
from pipeline.data.transcript_open import Identity
from pipeline.errors import InputError
from pipeline.llm.files import folder_replaced_by_copy, link_leading_out, named, replaced_by_copy

SEARCHED = ("*_TRANSCRIPT.csv", "*/*_TRANSCRIPT.csv", "*.txt", "*.jsonl")
_DAIC = "_transcript.csv"
_NONE = -1  # a line's number or span that is not there (a file of one transcript)


def _wanted(name: str, nested: bool) -> bool:
    lower = name.lower()
    return lower.endswith(_DAIC) or (not nested and lower.endswith((".txt", ".jsonl")))


_FILE, _FOLDER, _NEITHER = 0, 1, 2  # what an entry is, a link followed


def _listing(folder: Path) -> list[tuple[str, int, bool]]:
    """The folder's entries by name (as its Paths sort, within one folder), each with what it is and
    whether it is a link: from the folder's own listing, so that only a link costs a stat."""
    listed = []
    with os.scandir(folder) as entries:
        for entry in entries:
            try:
                kind = _FILE if entry.is_file() else _FOLDER if entry.is_dir() else _NEITHER
            except OSError:  # a link in a loop
                kind = _NEITHER
            listed.append((entry.name, kind, entry.is_symlink()))
    listed.sort()
    return listed


def found(path: Path, root: Path) -> list[str]:
    """The transcript files under `path`, each as its name under it ("" for `path` itself), in the
    order they are read; a macOS metadata file is skipped with a warning. `path` may itself be a
    link (data/interviews -> /mnt/data): what lies under where it leads is inside; a link in it that
    leads out of it is refused, and so is a name that is not UTF-8 or is a transcript's but not a file."""
    return listed(path, root).files


class Listed(NamedTuple):
    """The transcript files `found` (their order), and those of them reached through a link (a link
    itself, or a file in a linked folder)."""

    files: list[str]
    linked: set[str]


def listed(path: Path, root: Path) -> Listed:
    """`found`'s files, and which of them are reached through a link (ShownNames names them)."""
    shown = shown_path(path, root)
    if not path.exists():
        fix = "point data.transcripts in params.yaml at one"
        raise InputError(shown, None, "no such file or folder", fix)
    if path.is_file():
        if path.name.startswith("._") or path.suffix.lower() not in (".csv", ".txt", ".jsonl"):
            raise InputError(shown, None, "not a transcript file", "use NNN_TRANSCRIPT.csv, *.txt or *.jsonl")
        return Listed([""], set())
    searched = _Searched(path, root)
    top = _listing(path)
    for name, kind, link in top:
        searched.choose(name, kind, link, nested=False)
    for folder, kind, folder_link in top:
        if kind == _FOLDER:
            for name, kind_in, link in _listing(path / folder):
                searched.choose(f"{folder}/{name}", kind_in, link or folder_link, nested=True)
    if not searched.chosen:
        problem = "no transcripts in this folder; looked for " + ", ".join(SEARCHED)
        raise InputError(shown, None, problem, "add transcripts in one of those layouts, or point elsewhere")
    return Listed(searched.chosen, searched.linked)


class ShownNames:
    """Each file's name in messages, as shown_path gives it (relative to the project where its
    realpath lies in it), without a realpath a file where none is needed (issue 33): shown_path
    resolved every component of every interview's path, the project's folders and the interviews
    folder's one-entry-an-interview listing included, at every stage's index; a tenth of the
    export's CPU, and more at a million interviews, whose folder's entries no longer stay in the
    kernel's caches. A file reached through no link lies where the folder's realpath and its name
    say, so its name is the folder's shown name and its own; a linked one is resolved as before, and
    so is every file of a folder whose realpath is not in the project (it could hold the project)."""

    def __init__(self, folder: Path, root: Path, linked: set[str]) -> None:
        self.folder, self.root, self.linked = folder, root, linked
        try:
            inside = Path(os.path.realpath(folder)).relative_to(os.path.realpath(root)).as_posix()
        except ValueError:
            inside = None
        self._prefix = None if inside is None else "" if inside == "." else f"{inside}/"

    def __call__(self, file: str) -> str:
        if self._prefix is None or not file or file in self.linked:
            return shown_path(self.folder / file if file else self.folder, self.root)
        return f"{self._prefix}{file}"


class _Searched:
    """The transcript files found so far under `path`, each checked as it is chosen."""

    def __init__(self, path: Path, root: Path) -> None:
        self.path, self.root = path, root
        self.real = os.path.realpath(path)  # where a link in it must lead, the folder's own link followed
        self.chosen: list[str] = []
        self.linked: set[str] = set()  # those chosen that are links or lie in a linked folder

    def choose(self, relative: str, kind: int, link: bool, nested: bool) -> None:
        name = relative.rsplit("/", 1)[-1]
        if name.startswith("._"):
            if kind == _FILE and _wanted(name[2:], nested):
                self._skipped(relative)
        elif name == ".DS_Store" and kind == _FILE:
            self._skipped(relative)
        elif _wanted(name, nested):
            self._check(relative, kind, link)
            self.chosen.append(relative)
            if link:
                self.linked.add(relative)

    def _skipped(self, relative: str) -> None:
        message = (
            f"{shown_path(self.path / relative, self.root)}: skipped a macOS metadata file, not a transcript"
        )
        warnings.warn(message, InputWarning, stacklevel=5)  # the caller of index_transcripts

    def _check(self, relative: str, kind: int, link: bool) -> None:
        """An InputError unless the entry named like a transcript is one to read: its name UTF-8 (it
        becomes an item id, written into prompts and records), inside the folder, and a file."""
        if not relative.isascii():
            try:
                relative.encode("utf-8")
            except UnicodeEncodeError:  # a byte that is not UTF-8, which os.scandir kept as a lone surrogate
                named = os.fsencode(self.path / relative).decode("utf-8", "backslashreplace")
                fix = "rename it with a UTF-8 name (e.g. convmv -f latin1 -t utf-8 --notest), or move it out"
                raise InputError(named, None, "the file's name is not UTF-8", fix) from None
        # A link, or a file in a linked folder, that leads out would put another file's text in prompts.
        target = os.path.realpath(self.path / relative) if link else None
        outside = target is not None and os.path.commonpath([self.real, target]) != self.real
        if kind == _FILE and not outside:
            return
        shown = f"{shown_path(self.path, self.root)}/{relative}"  # (made only for an error: it resolves)
        if outside:
            problem, fix = self._leading_out(relative, shown, target)
        elif kind == _FOLDER:
            problem = "a folder named like a transcript file (as a tool that writes a folder of parts makes)"
            fix = "put the transcript file itself here, or rename the folder or move it out"
        else:
            problem = "named like a transcript, but not a file (a link to nothing, or a pipe)"
            fix = "restore the file it stands for, or delete it"
        raise InputError(shown, None, problem, fix)

    def _leading_out(self, relative: str, shown: str, target: str | None) -> tuple[str, str]:
        """The problem and the fix of a file read through a link out of the folder: the file itself a
        link, or a folder above it (DAIC-WOZ's `300_P` linked), whose copy is what goes in its place
        (the file's copy put through the linked folder would land where the link leads)."""
        link = link_leading_out(str(self.path), relative)
        folder = relative if link is None else os.path.relpath(link, self.path)
        if folder == relative:
            where = f"{named(target or '')}, outside the folder ({named(self.real)})"
            problem = f"a link to {where}, which alone is read"
            return problem, f"copy the file in, in place of the link: {replaced_by_copy(shown, target)}"
        through, leads = f"{shown_path(self.path, self.root)}/{folder}", os.path.realpath(str(link))
        problem = (
            f"read through {named(through)}, a link to {named(leads)}, outside the folder "
            f"({named(self.real)}), which alone is read"
        )
        return problem, f"copy the folder in, in place of the link: {folder_replaced_by_copy(through, leads)}"


class Places:
    """A row a transcript: its file (a name under `folder`), identity, and JSONL line and byte span."""

    def __init__(self, folder: Path, root: Path) -> None:
        self.folder, self.root = folder, root
        shown = shown_path(folder, root)
        self._prefix = "" if shown == "." else f"{shown}/"  # a file's name shown, but for its name
        self._files: list[str] = []  # by row: the file's name under `folder`
        self._shown: dict[int, str] = {}  # by row: a name shown that is not the folder's and the file's
        self._numbers = array("q")  # by row: size, mtime_ns, ctime_ns, line, span's start, span's size
        self._inodes = array("Q")  # by row: the file's device and inode

    def __len__(self) -> int:
        return len(self._files)

    def add(
        self, file: str, shown: str, identity: Identity, line: int | None, span: tuple[int, int] | None
    ) -> None:
        if shown != self._shown_as(file):
            self._shown[len(self._files)] = shown
        self._files.append(file)
        start, size = (_NONE, _NONE) if span is None else span
        device, inode, *times = identity
        self._inodes.extend((device, inode))
        self._numbers.extend((*times, _NONE if line is None else line, start, size))

    def _shown_as(self, file: str) -> str:
        return f"{self._prefix}{file}" if file else self._prefix.removesuffix("/") or "."

    def path(self, row: int) -> Path:
        file = self._files[row]
        return self.folder / file if file else self.folder

    def shown(self, row: int) -> str:
        """The file's name in messages, as shown_path gave it when the row was added."""
        held = self._shown.get(row)
        return self._shown_as(self._files[row]) if held is None else held

    def identity(self, row: int) -> Identity:
        at, numbers = 6 * row, self._numbers
        return self._inodes[2 * row], self._inodes[2 * row + 1], numbers[at], numbers[at + 1], numbers[at + 2]

    def line(self, row: int) -> int | None:
        line = self._numbers[6 * row + 3]
        return None if line == _NONE else line

    def span(self, row: int) -> tuple[int, int] | None:
        start, size = self._numbers[6 * row + 4], self._numbers[6 * row + 5]
        return None if start == _NONE else (start, size)

    def rows(self, rows: Iterable[int]) -> Places:
        """These rows, in this order, as a table of their own."""
        taken = Places.__new__(Places)
        taken.folder, taken.root, taken._prefix = self.folder, self.root, self._prefix
        taken._files, taken._shown, taken._numbers, taken._inodes = [], {}, array("q"), array("Q")
        for row in rows:
            if row in self._shown:
                taken._shown[len(taken._files)] = self._shown[row]
            taken._files.append(self._files[row])
            taken._numbers.extend(self._numbers[6 * row : 6 * row + 6])
            taken._inodes.extend(self._inodes[2 * row : 2 * row + 2])
        return taken

    def first(self, wanted: Callable[[int], bool]) -> int | None:
        """The first row `wanted` takes (an error's look back: rare)."""
        return next((row for row in range(len(self._files)) if wanted(row)), None)
