"""What judgeloop prints of a record on a terminal: every character that could act, hide or reorder,
shown as its escape. The one function for every command (audit, cache, status, compare, batch, the
stages' errors through pipeline.errors).

A record's text is whatever someone else wrote: a model's reply (or a prompt-injected document it
quotes), a key, a stage name or a run summary in a shared folder. Printed raw, `ESC [2J` clears the
screen, `ESC [1A` and a carriage return overwrite lines already printed, an OSC sequence sets the
window title or a hyperlink, Unicode's bidi overrides make text read in another order than it is
stored, and zero-width and tag characters hide text that a reader cannot see but a model does. So
`shown` writes, as an escape (`\\x1b`, `\\r`, `\\u202e`, `\\U000e0041`):

- every C0 control but the newline and the tab, DEL, and every C1 control (U+0085 among them);
- bidi controls (U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069);
- zero-width and invisible format characters (U+00AD, U+180E, U+200B-U+200D, U+2060-U+2064,
  U+FEFF, U+FFF9-U+FFFB) and the line and paragraph separators (U+2028, U+2029);
- Unicode tag characters (U+E0000-U+E007F), which spell hidden ASCII;
- lone surrogates (U+D800-U+DFFF), which a terminal's UTF-8 cannot even encode: printed raw, they
  raise UnicodeEncodeError in place of the message;
- the noncharacters U+FFFE and U+FFFF, which no XML file may hold (the reports' SVGs show their
  labels through here too, pipeline.reports.svg).

`one_line=True` escapes the newline and the tab too, for a value printed inside one line of output
(a key, a stage name, a summary's field). `shown_line` escapes the newline but keeps the tab, for a
line of output that is itself someone's text (a diff's line of a reply, `status`'s and `exp list`'s
lines): a tab cannot start a line, and it is shown as `audit` prints it. Plain text, accents and
emoji pass unchanged.

The report pages show every recorded text through `shown` too (pipeline.reports.templating), so a
browser reorders or hides no more than a terminal does.

`escape_logs` puts every log message and warning a process prints through `shown` too.
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Callable
from typing import Any

import click

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_INVISIBLE = "\u00ad\u180e\u200b-\u200d\u2060-\u2064\ufeff\ufff9-\ufffb\u2028\u2029\U000e0000-\U000e007f"
_HALVES = "\ud800-\udfff"  # lone surrogates (a str cannot hold a paired one)
_NOT_XML = "\ufffe\uffff"
_UNSAFE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}{_INVISIBLE}{_HALVES}{_NOT_XML}]")
_UNSAFE_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}{_INVISIBLE}{_HALVES}{_NOT_XML}]")
_NAMED = {"\r": "\\r", "\x0b": "\\v", "\x0c": "\\f", "\x08": "\\b", "\x00": "\\0", "\n": "\\n", "\t": "\\t"}


def _visible(match: re.Match[str]) -> str:
    char = match[0]
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def shown(text: str, *, one_line: bool = False) -> str:
    """`text` safe to print: every control, invisible and reordering character as its escape (see
    the module's docstring); newlines and tabs kept unless `one_line`."""
    return (_UNSAFE_LINE if one_line else _UNSAFE).sub(_visible, text)


def shown_line(text: str) -> str:
    """`text` shown safely (`shown`) as one line of output: a line break in it (a model name's, an
    item id's) as its escape, a tab kept as a tab (see the module's docstring)."""
    return shown(text).replace("\n", "\\n")


def framed(text: str, margin: str = "  | ") -> str:
    """`text` with every line behind `margin`, so that no line of it starts where the output's own
    headers do: a reply holding newlines cannot print what looks like another call's header."""
    return "\n".join(margin + line for line in text.split("\n"))


def echo(text: str, **kwargs: Any) -> None:
    """click.echo of `text` shown safely: what every command prints of a record goes through here."""
    click.echo(shown(text), **kwargs)


class _ShownRecord(logging.LogRecord):
    def getMessage(self) -> str:
        return shown(super().getMessage())


def escape_logs() -> None:
    """Every log message and warning this process prints, shown safely: a stage's warnings carry
    what others wrote (a server's error text in a retry line, an item id or a file name from the
    data), and logging and the warnings module print it raw. Installed by the entry points (the
    judgeloop command, the stage runner), once; a record factory someone else installed is left be."""
    if logging.getLogRecordFactory() is logging.LogRecord:
        logging.setLogRecordFactory(_ShownRecord)
    if getattr(warnings.formatwarning, "__module__", None) != __name__:
        warnings.formatwarning = _shown_warning(warnings.formatwarning)


def _shown_warning(format_warning: Callable[..., str]) -> Callable[..., str]:
    def formatted(*args: Any, **kwargs: Any) -> str:
        return shown(format_warning(*args, **kwargs))

    return formatted
