"""Reading a data file a person gave us: UTF-8 text as lines, or an error naming the file, the line
and the fix. Shared by every loader of the data a design reads (transcripts, labels, RAG rows,
ratings, catalogs, listening requests, SummEval's annotations).

A file larger than MAX_INPUT_BYTES is refused before it is read: a path that points at the wrong
file (a database dump, a model's weights) would otherwise fill the memory, minutes later."""

from __future__ import annotations

import io
import math
import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from pipeline.data.json_keys import REPEATED_FIX, repeated_key, repeated_problem
from pipeline.errors import InputError
from pipeline.llm.bounds import MAX_LINE_BYTES, SURROGATE_FIX, depth_problem, long_line, surrogate_problem
from pipeline.llm.files import NotARegularFile, open_regular


class InputWarning(UserWarning):
    """A data file was skipped, or looks inconsistent; loading went on."""


MAX_INPUT_BYTES = 256 * 2**20  # far above any corpus judgeloop reads (SummEval's is 11 MB)


def check_size(size: int, shown: str) -> None:
    if size > MAX_INPUT_BYTES:
        raise InputError(
            shown,
            None,
            f"the file is {size:,} bytes, more than the {MAX_INPUT_BYTES:,} judgeloop reads as one input",
            "check that this is the file you meant; split a larger data set into parts",
        )


def decode(data: bytes, shown: str) -> str:
    """UTF-8 text without a byte order mark; an InputError naming the line of a byte that is not."""
    data = data.removeprefix(b"\xef\xbb\xbf")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        fix = f"re-encode the file as UTF-8, e.g. iconv -f WINDOWS-1252 -t UTF-8 '{shown}' > fixed"
        raise InputError(shown, line, f"byte 0x{data[exc.start]:02x} is not UTF-8", fix) from None


@contextmanager
def opened(path: Path, shown: str) -> Iterator[io.BufferedReader]:
    """The file opened once, its size checked on what was opened (not on the path, which may be
    replaced or grown after a look at it; a folder, a pipe or a device put in its place is refused,
    never waited on); read it with `read_limited`."""
    try:
        file = open_regular(path)
    except NotARegularFile as exc:
        raise InputError(shown, None, str(exc), "put the data file itself in its place") from None
    except OSError as exc:  # gone since a look at it, not this user's to read, a link in a loop
        raise InputError(shown, None, f"cannot be read ({exc.strerror})", "make it a readable file") from None
    with file:
        check_size(os.fstat(file.fileno()).st_size, shown)
        yield file


def read_limited(stream: io.BufferedIOBase, shown: str) -> bytes:
    """The stream's bytes, no more than the limit allows (checked again on what was read)."""
    data = stream.read(MAX_INPUT_BYTES + 1)
    check_size(len(data), shown)
    return data


def read_text(path: Path, shown: str) -> str:
    """The file as UTF-8 text, once its size is checked. `shown` names it in errors. The size checked
    is that of the file opened, and no more bytes than it allows are read: a file replaced or grown
    after a look at its path is not read whole."""
    with opened(path, shown) as file:
        data = read_limited(file, shown)
    return checked_text(data, shown)


def checked_text(data: bytes, shown: str) -> str:
    """A file's bytes, read once their size was checked, as UTF-8 text (read_text)."""
    if (long := long_line(data)) is not None:  # refused before decoding and splitting copy it
        raise InputError(
            shown,
            long,
            f"the line is longer than {MAX_LINE_BYTES:,} bytes, far more than a record of judgeloop's data",
            "check that this is the file you meant (one record per line)",
        )
    return decode(data, shown)


def read_lines(path: Path, shown: str) -> list[str]:
    """The file's lines, without a UTF-8 byte order mark or line ends. `shown` names it in errors."""
    return text_lines(read_text(path, shown), shown)


def text_lines(text: str, shown: str) -> list[str]:
    """A file's text (read_text) as its lines, as read_lines gives them."""
    if not text.strip():
        raise InputError(shown, 1, "the file is empty", "delete it, or export it again")
    return [line.removesuffix("\r") for line in text.split("\n")]


COLUMN_FIX = "keep one of the two columns (delete or rename the other)"


def repeated_column(header: Sequence[str], read_as: Sequence[str | None]) -> str | None:
    """Why a CSV header cannot be read, or None: two of its columns are read as one (`read_as`: what
    each column of `header` is read as, None where it is ignored), and a reader keeping the columns
    by name would take one of the two silently (a dict, the last). Columns it ignores may repeat.
    The names said are the reader's own (a column it reads), never other text of the file."""
    first: dict[str, int] = {}
    for at, field in enumerate(read_as):
        if field is None or (before := first.setdefault(field, at)) == at:
            continue
        if header[before] == header[at]:
            return f"the column {header[at]!r} is given twice (columns {before + 1} and {at + 1})"
        return (
            f"columns {before + 1} and {at + 1}, {header[before]!r} and {header[at]!r}, both give the {field}"
        )
    return None


def plain_number(cell: str) -> float:
    """The number a CSV cell holds as a spreadsheet or pandas reads it, or NaN: ASCII digits, no
    `_`. Python's float() also reads "1_0" as 10 and Arabic-Indic or full-width digits ("١٠",
    "１０") as 10, which those read as text: a label or a catalog value no other tool sees."""
    if not cell.isascii() or "_" in cell:
        return math.nan
    try:
        return float(cell)
    except ValueError:
        return math.nan


def shown_path(path: Path, root: Path) -> str:
    """How a file is named in messages: relative to the project root when it lies under it."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def json_objects(path: Path, shown: str) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """Each non-blank line of a JSONL file with its number: the JSON object, or why it is not one.
    Callers decide whether a bad line stops the read (an InputError) or is set aside (a batch); a
    line holding a lone surrogate (refuse_surrogates) or giving a key twice in one object
    (pipeline.data.json_keys) always stops it."""
    for number, line in enumerate(read_lines(path, shown), start=1):
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            if (lone := _LONE_ESCAPE.search(line)) is not None:  # orjson refuses it; say why, and the fix
                problem = f"the escape {lone[0]} alone stands for half a character, which UTF-8 cannot hold"
                raise InputError(shown, number, problem, SURROGATE_FIX) from None
            yield number, f"not JSON ({exc})"
            continue
        if (deep := depth_problem(value)) is not None:
            yield number, f"not a record ({deep})"
            continue
        refuse_surrogates(value, shown, number)
        if (key := repeated_key(line)) is not None:  # orjson kept the last value silently
            raise InputError(shown, number, repeated_problem(key, shown), REPEATED_FIX)
        yield number, value if isinstance(value, dict) else "not a JSON object"


def refuse_surrogates(value: Any, shown: str, line: int | None, text: str | None = None) -> None:
    """An InputError if `value`, parsed from the file `shown` at `line`, holds a lone surrogate
    (pipeline.llm.bounds.surrogate_problem): it would break every recording and output it reached.
    With the JSON `text` of a whole file (line None), the line is that of the first lone escape."""
    if (problem := surrogate_problem(value)) is None:
        return
    if line is None and text is not None and (found := _LONE_ESCAPE.search(text)) is not None:
        line = text.count("\n", 0, found.start()) + 1
    raise InputError(shown, line, problem, SURROGATE_FIX)


# A \uD800-\uDBFF escape not followed by a \uDC00-\uDFFF one, or the latter not after the former.
_LONE_ESCAPE = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)
