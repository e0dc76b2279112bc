"""Writing files that others read, and turning names into paths, safely.

    atomic_write(path, text)       readers see the old file or the new one, never a part
    atomic_write_chunks(path, it)  the same, the text given a piece at a time (never whole in memory)
    replacing(path)                the same, written through a bytes handle as a `with` block
    replacement(path)              the same, its temporary file read back before it is committed (or not)
    new_file_mode(path)            the mode a plain write would leave at path (for a file made aside)
    AtomicText(path)               the same, written through a text handle (a csv.writer's, say)
    folder_to_write(folder, out)   folder made to write `out` in: never through a link out of the project
    locked(directory)              one writer at a time in a folder, across processes
    safe_name(name, what, fix)     a name that becomes a path: a plain name, or UnsafeNameError
    child(folder, name, ...)       folder / name, checked to stay inside folder
    refuse_links(folder, ...)      no symbolic link in folder (or in it and below): UnsafeNameError
    open_regular(path)             a file opened to be read, never a folder, pipe or device: NotARegularFile
    read_regular(path, limit)      its bytes, at most `limit` of them: TooLarge past it (both OSErrors)

Why unique temporary names: two writers of one file (two processes recording the same stage, a
stage and `judgeloop cache merge`) that shared `calls.jsonl.tmp` renamed each other's half-written
file away, and the second rename failed with a raw FileNotFoundError. Each write now has its own
temporary file in the target's folder (so os.replace is an atomic rename on one file system), named
`.<target>.<random>.locked.tmp`: hidden, ignored by git (.gitignore) and DVC (.dvcignore), and removed
when the write fails. Its writer holds an flock on it from its creation until after the rename, so one
that a write killed outright (SIGKILL, OOM, power) left is removed by the next write into that folder
(pipeline.llm.killed_writes).
The new file gets the mode a plain write would leave (`new_file_mode`): the old file's, else the umask's.

A name read from the command line or from a file (a stage's recordings folder, an exported stage)
becomes a path only if it is a plain name: letters, digits, `.`, `_`, `-`, not starting with a dot,
at most 100 characters; and the path it makes must resolve inside its folder (a symbolic link
pointing out is refused too).

Symbolic links inside the folders judgeloop writes (the cache folder, the recordings folder) are
refused before anything is read or written there, dangling ones too: a `cache.db` or a shard folder
that is a link made the cache write its database and value files wherever the link points, and a
stage folder that links to another stage's made two stages write one recording. (The folder itself
may be a link: that is how a user puts the cache on another disk.)

Every output and recording is written in a folder made by folder_to_write: the writers above and
`locked` (the recordings' stage folder, the item pages' folder) make theirs there. A folder named
inside the project (the working folder, where DVC runs the stages) that resolves outside it is
refused, naming the output, where the link leads and the fix: git stores symbolic links, so a pull
request could commit `outputs -> /home/u/.ssh`, and an out `outputs/authorized_keys`, which params
checks only as text, would be written there. A link that stays inside the project is followed. A
folder named outside the project (an absolute path: the cache on another disk) is the user's choice.
So is the local state's folder, `.judgeloop` (LOCAL_STATE): what judgeloop keeps on this machine (the
cache, run summaries, memos, batch rounds, snapshots, and a page a user asks for there, such as
`judgeloop diff --html .judgeloop/diff`), ignored by git, which a user may link to another disk. A
folder named under it is written wherever it leads; no out named in params can lie under it
(pipeline.llm.settings.OutParam refuses one), so the rule above still holds for every output.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import re
import shlex
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO, TextIO

from pipeline.errors import UnsafeNameError, UnwritableTextError
from pipeline.llm.killed_writes import TMP_SUFFIX as TMP_SUFFIX
from pipeline.llm.killed_writes import locked_temporary, sweep_killed_writers, temporary_prefix
from pipeline.llm.terminal import shown

LOCAL_STATE = ".judgeloop"  # the local state's folder, in the project (see the module)
# A pipe or a device opened to be looked at must not wait for a writer or become the terminal.
READ_FLAGS = (
    os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
)
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def atomic_write(path: Path, data: str | bytes) -> None:
    """Replace `path` with `data` in one step: through a temporary file of its own in the same folder,
    flushed to disk, then renamed over the target. Text holding a lone surrogate, which UTF-8 cannot
    encode, is refused (UnwritableTextError) and the old file left as it was: every reader refuses
    one where it enters, and this is the last line of that defence, so that no recording or output
    is ever written that its readers would refuse."""
    if isinstance(data, str):
        data = _utf8(path, data)
    atomic_write_chunks(path, (data,))


def atomic_write_chunks(
    path: Path, chunks: Iterable[str | bytes], *, local_state: bool = False, mode: int | None = None
) -> None:
    """atomic_write of the concatenated `chunks`, written as they come: a recording of a million
    calls is never held whole. A chunk that would hold a lone surrogate stops the write as
    atomic_write does (UnwritableTextError, the old file unchanged), naming the chunk's line.
    `local_state`: a file of the local state beside the cache (a run's summary), which may lie
    anywhere as the cache may (a `.judgeloop` linked to another disk): its folder is not held to
    the outputs' rule (folder_to_write). `mode`: the file's permission bits where they must not be
    a plain write's (a private memo's 0600; the temporary file has them from its creation)."""
    new = _Replacement(path, local_state=local_state, mode=mode)
    try:
        new.write(chunks)
    except BaseException:
        new.discard()
        raise
    new.commit()


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[BinaryIO]:
    """A bytes handle whose writes replace `path` in one step when the block ends (atomic_write's
    guarantees, the same _Replacement); if the block fails, the old file stands and nothing is left."""
    new = _Replacement(path)
    try:
        yield new.out
    except BaseException:
        new.discard()
        raise
    new.commit()


@contextlib.contextmanager
def replacement(path: Path) -> Iterator[_Replacement]:
    """A replacement of `path` (atomic_write's guarantees) for a writer that reads its temporary file
    back (`out`, opened to be written and read) before it decides: `commit` puts it in place; a block
    that ends without a commit, or fails, leaves the old file standing and no temporary file."""
    new = _Replacement(path)
    try:
        yield new
    finally:
        new.discard()  # (nothing once committed)


class _Replacement:
    """The one way a file is replaced here (atomic_write_chunks, AtomicText): bytes written to `out`,
    a temporary file of its own in `path`'s folder (see the module's docstring), that replaces `path`
    in one step at `commit` (flushed to disk, given the mode a plain write would leave, renamed over
    it); until then, and after `discard` (or a commit that failed), the old file stands and no
    temporary file is left."""

    def __init__(self, path: Path, *, local_state: bool = False, mode: int | None = None) -> None:
        if local_state:
            path.parent.mkdir(parents=True, exist_ok=True)
        else:
            folder_to_write(path.parent, path)
        self.path, self._mode = path, mode
        sweep_killed_writers(path.parent)
        self.out, self._tmp = locked_temporary(path.parent, temporary_prefix(path))
        self.done = False  # committed or discarded: nothing more is done

    def write(self, chunks: Iterable[str | bytes]) -> None:
        """The chunks written as they come, a str one as UTF-8 (UnwritableTextError, naming its line,
        for one that would hold a lone surrogate: see atomic_write)."""
        lines = 0
        for chunk in chunks:
            data = chunk if isinstance(chunk, bytes) else _utf8(self.path, chunk, lines)
            self.out.write(data)
            lines += data.count(b"\n")

    def commit(self) -> None:
        if self.done:
            return
        try:
            self.out.flush()
            os.fsync(self.out.fileno())
            # not mkstemp's 0600 (unless asked): as a plain write leaves it
            os.fchmod(self.out.fileno(), new_file_mode(self.path) if self._mode is None else self._mode)
            os.replace(self._tmp, self.path)
        except BaseException:
            self.discard()
            raise
        self.done = True
        self.out.close()  # only now lets go of the lock: until the rename, no sweep may take the file

    def discard(self) -> None:
        if self.done:
            return
        self.done = True
        with contextlib.suppress(FileNotFoundError):  # removed while still locked: never another's file
            os.unlink(self._tmp)
        with contextlib.suppress(OSError):  # a flush that fails again, on closing: the write is dropped
            self.out.close()


def new_file_mode(path: Path) -> int:
    """The permission bits a plain write would leave at `path`: an existing regular file's own (never
    a link's target's), else 0666 less the umask (0644 under 022, 0664 for a group's shared checkout
    under 002, 0600 under 077: a private checkout's outputs stay private)."""
    with contextlib.suppress(OSError):
        old = os.lstat(path)
        if stat.S_ISREG(old.st_mode):
            return stat.S_IMODE(old.st_mode) & 0o777
    return 0o666 & ~_umask()


def _umask() -> int:
    # Linux says it without changing it; elsewhere it is set and set back (no file is made between).
    with (
        contextlib.suppress(OSError, ValueError, IndexError),
        open("/proc/self/status", encoding="ascii", errors="replace") as status,
    ):
        for line in status:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


class AtomicText:
    """A text file written through `handle` as it comes (UTF-8, newlines as written), that replaces
    `path` in one step at `commit` with atomic_write's guarantees: until then, and after `discard`,
    the old file stands. As a context manager it commits when the block ends without an error and
    discards otherwise. (The bytes go through the same _Replacement as atomic_write_chunks'.)"""

    def __init__(self, path: Path) -> None:
        self._new = _Replacement(path)
        self.path = path
        self.handle: TextIO = io.TextIOWrapper(self._new.out, encoding="utf-8", newline="")

    def commit(self) -> None:
        if self._new.done:
            return
        try:
            self.handle.flush()  # what the text layer holds yet, into the bytes
        except BaseException:
            self._new.discard()
            raise
        self._new.commit()

    def discard(self) -> None:
        self._new.discard()

    def __enter__(self) -> TextIO:
        return self.handle

    def __exit__(self, kind: object, *exc: object) -> None:
        if kind is None:
            self.commit()
        else:
            self.discard()


def _utf8(path: Path, text: str, lines_before: int = 0) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        line = lines_before + text.count("\n", 0, exc.start) + 1
        raise UnwritableTextError(
            f"{path}: not written: line {line} would hold a lone surrogate (\\u{ord(text[exc.start]):04x}, "
            "half a character, which no UTF-8 file can hold), so no reader could read it back. Fix: find "
            "the input it came from (a JSON or YAML escape \\ud800 to \\udfff), write the character itself "
            "there, and run again; the old file is unchanged"
        ) from None


@contextlib.contextmanager
def locked(directory: Path) -> Iterator[None]:
    """Hold an exclusive lock on `directory` (created if missing) while the block runs: writers that
    read, change and replace a file in it take turns, across threads and processes. The lock is on
    the folder itself, so no lock file is left in it; the kernel lets go if the process dies."""
    folder_to_write(directory)
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def folder_to_write(folder: Path, output: Path | None = None) -> Path:
    """`folder`, made if missing, to write `output` in (the folder itself when None): UnsafeNameError,
    before anything is made, where `folder` is named inside the project but resolves outside it (a
    folder on its way is a symbolic link leading out; see the module's docstring)."""
    message = _leading_out(folder, folder if output is None else output)
    if message is not None:
        raise UnsafeNameError(message)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def path_under(path: str, folder: str) -> bool:
    """Whether `path` is `folder` or lies in it, by name (both already made absolute or real)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def link_leading_out(base: str, relative: str) -> str | None:
    """The first symbolic link on the way from `base` down to `relative` (a folder on the way, or
    the file itself) whose target lies outside `base`, as `base` joined with its name; None where
    there is none."""
    project = os.path.realpath(base)
    step = base
    for part in Path(relative).parts:
        step = os.path.join(step, part)
        if os.path.islink(step) and not path_under(os.path.realpath(step), project):
            return step
    return None


def replaced_by_copy(link: str, target: str | None = None) -> str:
    """The portable (POSIX) commands that put a copy of the file that the link `link` leads to
    (`target`, else its realpath) in its place, that file kept: GNU cp's --remove-destination is
    not on macOS or BSD, and `mv` replaces a link to a file, not what it leads to."""
    name, own = in_command(link), in_command(f"{link}.own")
    return f"cp -p -- {in_command(target or os.path.realpath(link))} {own} && mv -- {own} {name}"


def folder_replaced_by_copy(link: str, target: str) -> str:
    """The portable (POSIX) commands that put a copy of the folder `target`, which the link `link` leads
    to, in its place, that folder kept (`rm` of a link to a folder removes the link only)."""
    name, own = in_command(link), in_command(f"{link}.own")
    return f"cp -pR -- {in_command(target)} {own} && rm -- {name} && mv -- {own} {name}"


def named(path: str | os.PathLike[str]) -> str:
    """A path (or a link's target) as a message names it: on one line, every control and invisible
    character shown as its escape (pipeline.llm.terminal.shown), so that a name holding a newline or
    a terminal's escape can neither break the message nor act on the terminal."""
    return shown(os.fspath(path), one_line=True)


def in_command(path: str | os.PathLike[str]) -> str:
    """A path as a suggested command names it (after `--`, so that a name starting with `-` reads as
    no option), quoted for a POSIX shell: as it is where no character of it is shown as an escape
    (a backslash is not: `named` doubles one before what reads as an escape, `data\\test.csv`, and
    the command would name another file), else `named` (a newline or a terminal's escape, which a
    message never prints raw: POSIX sh has no quoting that spells one, so that command is shown,
    not run as written)."""
    text = os.fspath(path)
    exact = all(shown(character, one_line=True) == character for character in set(text))
    return shlex.quote(text if exact else named(text))


def _leading_out(folder: Path, output: Path) -> str | None:
    try:
        name, here = os.path.abspath(folder), os.getcwd()
        if path_under(name, os.path.join(here, LOCAL_STATE)):
            return None  # the local state, which may lie anywhere (see the module)
        project = os.path.realpath(here)
        if not path_under(name, here) or path_under(os.path.realpath(name), project):
            return None
    except (OSError, ValueError):  # no working folder, a NUL in the name: the write itself says so
        return None
    link, step = name, here  # the first folder on the way (from the project down) that leads out
    for part in os.path.relpath(name, here).split(os.sep):
        step = os.path.join(step, part)
        if os.path.islink(step) and not path_under(os.path.realpath(step), project):
            link = step
            break
    relative = os.path.relpath(link, here)
    return (
        f"{named(output)}: not written: {named(relative)} is a symbolic link to "
        f"{named(os.path.realpath(link))}, which lies outside the project ({named(project)}); judgeloop "
        "writes outputs and recordings only inside the project, so that a link committed with it "
        f"cannot send them over another file of this machine. Fix: remove the link "
        f"(rm -- {in_command(relative)}) and run again, or make it a link to a folder inside the project."
    )


def safe_name(name: str, what: str, fix: str) -> str:
    """`name` if it is a plain name that can become one path component, else UnsafeNameError."""
    if not isinstance(name, str) or _PLAIN_NAME.fullmatch(name) is None:
        raise UnsafeNameError(
            f"{what} {name!r} is not a plain name (letters, digits, '.', '_', '-'; not starting with a "
            f"dot; at most 100 characters), so it cannot name a folder or file. Fix: {fix}"
        )
    return name


def child(folder: Path, name: str, what: str, fix: str) -> Path:
    """folder / name, for a plain `name` whose path resolves inside `folder`."""
    path = folder / safe_name(name, what, fix)
    if not path.resolve().is_relative_to(folder.resolve()):
        raise UnsafeNameError(
            f"{what} {name!r}: {named(path)} leads outside {named(folder)} (a link?). Fix: {fix}"
        )
    return path


def links_in(folder: Path, *, below: bool = False) -> list[Path]:
    """The symbolic links (dangling ones too) directly in `folder`, or anywhere under it (`below`);
    none for a folder that does not exist. Links are never followed."""
    found: list[Path] = []
    pending = [folder]
    while pending:
        current = pending.pop()
        try:
            with os.scandir(current) as entries:
                for entry in entries:
                    if entry.is_symlink():
                        found.append(Path(entry.path))
                    elif below and entry.is_dir(follow_symlinks=False):
                        pending.append(Path(entry.path))
        except (FileNotFoundError, NotADirectoryError):
            continue
    return sorted(found)


def refuse_links(
    folder: Path,
    what: str,
    fix: str,
    *,
    itself: bool = False,
    below: bool = False,
    read_as_file: Callable[[Path], object] | None = None,
) -> None:
    """UnsafeNameError naming the first symbolic link in `folder` (and `folder` itself if `itself`,
    everything under it if `below`): what is written or read through a link is outside the folder.
    `read_as_file`: what says (truthy) that a link in the folder is read as the file it leads to
    and never written through (a recording's link into DVC's cache: pipeline.llm.recordings.dvc_links)."""
    inside = links_in(folder, below=below)
    if read_as_file is not None:
        inside = [link for link in inside if not read_as_file(link)]
    linked = ([folder] if itself and folder.is_symlink() else []) + inside
    if linked:
        link = linked[0]
        more = f" (and {len(linked) - 1} more)" if len(linked) > 1 else ""
        raise UnsafeNameError(
            f"{named(link)}{more}: a symbolic link (to {named(os.readlink(link))}) in {what}, refused "
            f"before anything is read or written there: through it judgeloop would write outside "
            f"{named(folder)}. Fix: remove the link (rm -- {in_command(link)}){', ' + fix if fix else ''}."
        )


class NotARegularFile(OSError):
    """What stands at a path opened to be read is not a regular file: `kind` says what it is."""

    def __init__(self, kind: str) -> None:
        super().__init__(f"it is {kind}, not a file")
        self.kind = kind


def open_regular(path: Path) -> io.BufferedReader:
    """`path` opened once to be read, asked through the descriptor (never a second look at the path)
    that it is a regular file: a folder, a pipe (opened without waiting for a writer) or a device
    (/dev/zero, the terminal) is refused with NotARegularFile, an OSError, as a failed open is."""
    fd = os.open(path, READ_FLAGS)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a folder" if stat.S_ISDIR(mode) else "a pipe" if stat.S_ISFIFO(mode) else "a device"
            raise NotARegularFile(kind)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class TooLarge(OSError):
    """A file read with a bound holds more bytes than the bound."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"more than {limit:,} bytes, far more than this file holds when it is the one meant")


def read_regular(path: Path, limit: int) -> bytes:
    """The bytes of the regular file at `path` (open_regular), at most `limit` of them: a file past the
    bound, or a link to /dev/zero, is refused (TooLarge, NotARegularFile: OSErrors, as a failed open
    is, so a caller that handles an unreadable file handles these)."""
    with open_regular(path) as file:
        data = file.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(limit)
    return data
