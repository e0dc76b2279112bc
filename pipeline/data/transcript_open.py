"""A transcript file opened and read through one descriptor: the bytes read for the index are those
of a file in the folder, and those read when its item runs are of the very file the index read.

The folder is listed once, at a stage's start (pipeline.data.transcript_places: a link leading out,
a name that is not UTF-8, anything named like a transcript that is not a file are refused there).
Each file is then read for the index, and again when its item runs, maybe hours later. Between the
listing and a read an entry can be replaced: by a link leading out of the folder, by another file
given the same size and time (os.utime), by a folder or a pipe. A look at the path and then an open
of the path is a race, so each read opens the file once and asks the descriptor (os.fstat):

- for the index (`read_listed`): a regular file (a pipe is opened without waiting for a writer,
  then refused), lying inside the folder, by where the kernel says the open file lies
  (/proc/self/fd; where there is none, the path's realpath, checked to be the file the descriptor
  holds: a narrower check). Its bytes and its identity come from that one descriptor.
- when its item runs (`read_again`): the same identity, or the stage stops, naming the file. The
  identity is the device and inode (the file, whatever its name), its size, and its modification
  and change times. The change time (st_ctime) is set by the kernel at every write, rename and
  os.utime, and no call sets it back: a file rewritten in place, its old size and time set back,
  is caught too.

Each read asks the descriptor again once it has read (one more fstat): a file written while it is
read, its bytes part old and part new, is refused too, not indexed or parsed. (The kernel keeps
those times at its clock tick, a few ms: a write within the tick of the look may go unseen.)
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pipeline.data.input_files import check_size
from pipeline.errors import InputError
from pipeline.llm.files import READ_FLAGS

_PROC_FD = "/proc/self/fd/"  # where Linux says where each open file lies
_U64 = (1 << 64) - 1
_STAGE_FIX = "leave the inputs as they are while a stage runs, then run it again"

Identity = tuple[int, int, int, int, int]  # st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns


def read_listed(path: Path, shown: str, inside: str | None) -> tuple[bytes, Identity]:
    """The file's bytes and identity, read for the index; an InputError unless it is a regular file
    lying in `inside` (the folder's realpath; None for a file data.transcripts names itself, which
    is trusted as a folder named there is)."""
    since = "since the folder was listed"
    fd = _opened(path, shown, since)
    try:
        status = os.fstat(fd)
        _refuse_not_a_file(status, shown, since, "restore the transcript file, or move it out")
        if inside is not None:
            _refuse_outside(fd, path, status, inside, shown)
        check_size(status.st_size, shown)
        identity = _identity(status)
        data = _read(fd, status.st_size)
        _unchanged_while_read(fd, identity, shown)
        return data, identity
    finally:
        os.close(fd)


def read_again(
    path: Path, shown: str, line: int | None, identity: Identity, span: tuple[int, int] | None, item_id: str
) -> bytes:
    """The bytes of the file the index read for `item_id` (those of `span`, or all of them); an
    InputError naming the file (and `line`) if another file stands in its place or it changed."""
    since = f"since it was read for item '{item_id}' at the stage's start"
    fd = _opened(path, shown, since, line)
    try:
        status = os.fstat(fd)
        _refuse_not_a_file(status, shown, since, _STAGE_FIX, line)
        held = _identity(status)
        if held != identity:
            replaced = held[:2] != identity[:2]  # another device and inode: another file
            problem = (
                "the file was replaced by another file (or a link to one)" if replaced else "the file changed"
            )
            raise InputError(shown, line, f"{problem} {since}", _STAGE_FIX)
        if span is None:
            data = _read(fd, status.st_size)
        else:
            start, size = span
            os.lseek(fd, start, os.SEEK_SET)
            data = _read(fd, size)
        _unchanged_while_read(fd, held, shown, line)
        return data
    finally:
        os.close(fd)


def _unchanged_while_read(fd: int, identity: Identity, shown: str, line: int | None = None) -> None:
    """An InputError if the file changed between the look at its descriptor and the end of the read
    (something writing it meanwhile): the bytes read may be part old, part new."""
    if _identity(os.fstat(fd)) != identity:
        raise InputError(
            shown, line, "the file changed while it was read (something is writing it)", _STAGE_FIX
        )


def _opened(path: Path, shown: str, since: str, line: int | None = None) -> int:
    try:
        return os.open(path, READ_FLAGS)  # a pipe never waited on (pipeline.llm.files)
    except (FileNotFoundError, NotADirectoryError) as exc:
        problem = f"cannot be read now ({exc.strerror}): it was moved, deleted or replaced {since}"
        raise InputError(shown, line, problem, _STAGE_FIX) from None
    except OSError as exc:  # not this user's to read, a link in a loop put in its place
        problem = f"cannot be read ({exc.strerror})"
        raise InputError(shown, line, problem, "make it readable, or move it out of the folder") from None


def _identity(status: os.stat_result) -> Identity:
    # (An inode past 64 bits, as ReFS gives on Windows, is held as its low 64: the index packs them.)
    device, inode = status.st_dev & _U64, status.st_ino & _U64
    return device, inode, status.st_size, status.st_mtime_ns, status.st_ctime_ns


def _refuse_not_a_file(
    status: os.stat_result, shown: str, since: str, fix: str, line: int | None = None
) -> None:
    mode = status.st_mode
    if stat.S_ISREG(mode):
        return
    kind = "a folder" if stat.S_ISDIR(mode) else "a pipe" if stat.S_ISFIFO(mode) else "a device or a socket"
    raise InputError(shown, line, f"it is now {kind}, not a transcript file: it was replaced {since}", fix)


def _refuse_outside(fd: int, path: Path, status: os.stat_result, inside: str, shown: str) -> None:
    """An InputError if the open file lies outside `inside`: a link leading out put in the place of
    an entry after the listing (which refuses one it meets), or a folder of the path replaced so."""
    try:
        where = os.readlink(_PROC_FD + str(fd))
    except OSError:  # no /proc: the path's realpath now, if it is the file the descriptor holds
        where = os.path.realpath(path)
        try:
            now = os.stat(where)
        except OSError:
            now = None
        if now is None or (now.st_dev, now.st_ino) != (status.st_dev, status.st_ino):
            problem = "it was replaced while it was opened, since the folder was listed"
            raise InputError(shown, None, problem, _STAGE_FIX) from None
    if where.startswith(inside if inside.endswith(os.sep) else inside + os.sep):
        return
    problem = (
        f"now leads to {where}, outside the folder ({inside}), which alone is read: "
        "it was replaced since the folder was listed"
    )
    fix = f"{_STAGE_FIX}; copy a transcript into the folder, never link one that lies outside it"
    raise InputError(shown, None, problem, fix)


def _read(fd: int, size: int) -> bytes:
    """`size` bytes from the descriptor's place (fewer at the file's end): one read for a file."""
    data = os.read(fd, size)
    if len(data) == size or not data:
        return data
    parts = [data]
    left = size - len(data)
    while left and (more := os.read(fd, left)):
        parts.append(more)
        left -= len(more)
    return b"".join(parts)
