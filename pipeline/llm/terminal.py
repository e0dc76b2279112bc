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
- every character shown as nothing, or as a blank that is not the space (pipeline.llm.invisible:
  Unicode's format characters, among them the bidi controls U+061C, U+200E-U+200F, U+202A-U+202E
  and U+2066-U+2069, the zero-width characters and the tag characters U+E0000-U+E007F that spell
  hidden ASCII; every default-ignorable character, among them the Hangul fillers and the
  variation selectors; every space but the space, and the line and paragraph separators);
- lone surrogates (U+D800-U+DFFF), which a terminal's UTF-8 cannot even encode: printed raw, they
  raise UnicodeEncodeError in place of the message;
- the noncharacters U+FFFE and U+FFFF, which no XML file may hold (the reports' SVGs show their
  labels through here too, pipeline.reports.svg).

A zero-width joiner inside an emoji sequence (👨‍💻) and a variation selector that changes how its
emoji is drawn (❤️) pass: they are visible text (pipeline.llm.invisible.kept_joiners).

A text may also hold an escape's own characters: a model can type the six characters `\\u202e`,
which must not look like a U+202E it sent. So a run of backslashes that stands right before what
reads as an escape (one of `r v f b 0 n t`, `x` and 2 hex digits, `u` and 4, `U` and 8, or a
character that is itself shown as an escape) is shown doubled, as a Python string writes it: the
six typed characters show as `\\\\u202e`, a real U+202E as `\\u202e`. Any other backslash
(`C:\\data`, `\\alpha`, a lone `\\`) is shown as it is. So a shown text reads back from the left:
an even run of backslashes before an escape's letters is half as many backslashes and the letters,
an odd run ends in that escape, and every other backslash is itself. So `shown` is for a record's
text where it is written (once: shown again, its escapes would read as typed); a whole message or
line that judgeloop composed around such texts goes through `guarded`, which escapes the characters
only, so that what `shown` wrote passes unchanged.

`one_line=True` escapes the newline and the tab too, for a value printed inside one line of output
(a key, a stage name, a summary's field). `shown_line` escapes the newline but keeps the tab, for a
line of output that is itself someone's text (a diff's line of a reply; `status`'s and `exp list`'s
lines, composed, are `guarded(line=True)`): a tab cannot start a line, and it is shown as `audit`
prints it. Plain text, accents and emoji pass unchanged.

The report pages show every recorded text through `shown` too (pipeline.reports.templating), so a
browser reorders or hides no more than a terminal does.

`escape_logs` puts every log message and warning a process prints through `guarded`, as
pipeline.errors does every error's message and `echo` every line a command prints.
`text_lines` breaks a text into lines as a terminal does, at "\\n" only (every diff view uses it).
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import click

from pipeline.llm.invisible import HIDDEN, HIDDEN_ASTRAL, HIDDEN_BMP, kept_joiners

_ESCAPE_LOOK = r"[rvfb0nt]|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}"  # what `_visible` writes


# Every character past U+FFFF is found, and `_visible` gives back those not hidden: a class with the
# hidden ranges there is scanned about three times as slowly as one with a single range.
_FOUND = HIDDEN_BMP + "\U00010000-\U0010ffff"
_ASTRAL = re.compile(f"[{HIDDEN_ASTRAL}]")


def _chars(controls: str, hidden: str = _FOUND) -> str:
    return f"[{controls}\x7f-\x9f{hidden}]"


def _unsafe(controls: str) -> re.Pattern[str]:
    """The characters to escape, and a backslash run before an escape's look (the module's docstring)."""
    return re.compile(f"\\\\+(?={_ESCAPE_LOOK}|{_chars(controls, HIDDEN)})|{_chars(controls)}")


_UNSAFE = _unsafe("\x00-\x08\x0b-\x1f")
_UNSAFE_NEWLINE = _unsafe("\x00-\x08\x0a-\x1f")  # shown_line: the newline too, the tab kept
_UNSAFE_LINE = _unsafe("\x00-\x1f")
# The characters only: `guarded`, and `shown` where the text holds no backslash (a plain class is
# scanned about three times as fast as the alternation).
_GUARD = re.compile(_chars("\x00-\x08\x0b-\x1f"))
_GUARD_LINE = re.compile(_chars("\x00-\x08\x0a-\x1f"))
_GUARD_ALL = re.compile(_chars("\x00-\x1f"))
# The same for a text all ASCII, which none of the others can hold: a class of the controls alone is
# scanned about four times as fast as one with the hidden characters' ranges beyond U+FFFF.
_ASCII = {
    pattern: re.compile(pattern.pattern.replace(HIDDEN, "").replace(_FOUND, ""))
    for pattern in (_UNSAFE, _UNSAFE_NEWLINE, _UNSAFE_LINE, _GUARD, _GUARD_LINE, _GUARD_ALL)
}
_FSI, _PDI = "\u2068", "\u2069"
# Where a right-to-left character (bidi class R, AL or AN) may stand: the blocks that
# DerivedBidiClass.txt gives R or AL by default, and U+200F. Written here, not read from the running
# Python's unicodedata, so that which names are isolated is the same on every Python, for the
# characters a later Unicode assigns there too (3.14's Garay, U+10D40-U+10D8F, is R).
_RIGHT_TO_LEFT = re.compile(
    "[\u0590-\u08ff\u200f\ufb1d-\ufdcf\ufdf0-\ufdff\ufe70-\ufeff\U00010800-\U00010fff\U0001e800-\U0001efff]"
)
_ISOLATE = re.compile(f"{_FSI}([^{_FSI}{_PDI}\n]*){_PDI}")
_NAMED = {"\r": "\\r", "\x0b": "\\v", "\x0c": "\\f", "\x08": "\\b", "\x00": "\\0", "\n": "\\n", "\t": "\\t"}


def _visible(match: re.Match[str]) -> str:
    char = match[0]
    if char[0] == "\\":  # a typed backslash run before an escape's look: doubled
        return char + char
    if char in _NAMED:
        return _NAMED[char]
    if char >= "\U00010000" and not _ASTRAL.match(char):
        return char  # found by the class's one range past U+FFFF (_FOUND), not hidden
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def shown(text: str, *, one_line: bool = False) -> str:
    """`text` safe to print: every control, invisible and reordering character as its escape (see
    the module's docstring); newlines and tabs kept unless `one_line`."""
    if "\\" not in text:
        return _escaped(_GUARD_ALL if one_line else _GUARD, text)
    return _escaped(_UNSAFE_LINE if one_line else _UNSAFE, text)


def _escaped(pattern: re.Pattern[str], text: str) -> str:
    """`text` with what `pattern` finds as its escape, but an emoji's own joiners (kept_joiners)."""
    if text.isascii():
        return _ASCII[pattern].sub(_visible, text)
    kept = kept_joiners(text)
    if not kept:
        return pattern.sub(_visible, text)
    return pattern.sub(lambda match: match[0] if match.start() in kept else _visible(match), text)


def shown_apart(parts: Sequence[str]) -> list[str]:
    """Each of `parts` shown (`shown`) as it is in their concatenation, so that the pieces written one
    after another read back to the whole: a backslash run at a part's end is doubled where what
    follows it, in the parts after, reads as an escape (an item page's `<pre>` shows its text in
    pieces: a reply's `\\` and the carriage return after it, shown apart, would read as `\\r`)."""
    if not any(part.endswith("\\") for part in parts):
        return [shown(part) for part in parts]
    out = []
    for n, part in enumerate(parts):
        if not part.endswith("\\"):
            out.append(shown(part))
            continue
        rest = "".join(parts[n + 1 :])
        after = rest[: len(rest) - len(rest.lstrip("\\")) + 9]  # the run's continuation and a look past it
        whole, tail = shown(part + after), shown(after)
        out.append(whole[: len(whole) - len(tail)])
    return out


def shown_line(text: str) -> str:
    """`text` shown safely (`shown`) as one line of output: a line break in it (a model name's, an
    item id's) as its escape, a tab kept as a tab (see the module's docstring)."""
    return _escaped(_UNSAFE_NEWLINE if "\\" in text else _GUARD_LINE, text)


def guarded(text: str, *, line: bool = False, isolates: bool = False) -> str:
    """A message or a line of output that judgeloop composed, safe to print: every control, bidi
    and invisible character in it as its escape (the newline too if `line`), backslashes as they
    are. The net under whole messages (errors, log records, warnings, `echo`, status's lines): the
    record's texts in them were shown already (`shown`), and what `shown` wrote passes unchanged.

    `isolates=True`, for a text whose every part someone else wrote was shown (or guarded) before
    it was composed: judgeloop's own isolates (`isolated`) pass, each a pair on one line around a
    text with nothing to escape in it; any other bidi control is shown as its escape."""
    pattern = _GUARD_LINE if line else _GUARD
    if not isolates or _FSI not in text:
        return _escaped(pattern, text)
    out, at = [], 0
    for match in _ISOLATE.finditer(text):
        if _escaped(pattern, match[1]) == match[1]:
            out += [_escaped(pattern, text[at : match.start()]), match[0]]
            at = match.end()
    return "".join([*out, _escaped(pattern, text[at:])])


def isolated(text: str) -> str:
    """`text`, shown already (`shown(..., one_line=True)`), between the bidi isolates FSI and PDI
    (U+2068, U+2069) where it holds a right-to-left character: a name in a row of numbers, so that
    an Arabic or Hebrew name cannot draw the numbers after it into its own run and show run A's and
    run B's in swapped order on a terminal that lays out bidi text (UAX #9, rules W2 and N1: a
    number after a right-to-left letter, or beside an Arabic digit, takes its direction). A text
    with none (bidi classes R, AL, AN; the blocks where they stand, frozen: `_RIGHT_TO_LEFT`) is left
    as it is: an isolate would change nothing in it.
    Printed through `guarded(..., isolates=True)`."""
    if not _RIGHT_TO_LEFT.search(text):
        return text
    return f"{_FSI}{text}{_PDI}"


def closed_isolates(text: str) -> str:
    """`text` (one line) with a PDI added for each FSI that a cut left open, before a last `…`."""
    missing = text.count(_FSI) - text.count(_PDI)
    if missing <= 0:
        return text
    cut = text.endswith("…")
    return (text[:-1] if cut else text) + _PDI * missing + ("…" if cut else "")


def spelled(value: Any) -> str:
    """An option's or a setting's value as one line of output spells it, to be shown once where it
    is written: a list as `['a', 'b']` with each text between quotes as itself. Not repr, which
    writes a text's escapes (a newline as `\\n`) that `shown` would then double, so that a real
    newline would read as the two characters a model typed."""
    if isinstance(value, list | tuple):
        return (
            "[" + ", ".join(_quoted(item) if isinstance(item, str) else spelled(item) for item in value) + "]"
        )
    return str(value)


def _quoted(text: str) -> str:
    """`text` between quotes as Python chooses them (`'`, or `"` for a text holding `'` alone), the
    quote inside escaped as `\\'` and a backslash run before it, or before the closing quote, doubled,
    so that `', '` inside one text never reads as two texts: `["a', 'b"]` is one stop, `['a', 'b']`
    two, and `['a\\\\', 'b']` two as well (a text's last backslash never escapes the closing quote)."""
    quote = '"' if "'" in text and '"' not in text else "'"
    body = re.sub(rf"(\\*)({quote}|\Z)", lambda m: m[1] * 2 + ("\\" + quote if m[2] else ""), text)
    return quote + body + quote


def framed(text: str, margin: str = "  | ") -> str:
    """`text` with every line behind `margin`, so that no line of it starts where the output's own
    headers do: a reply holding newlines cannot print what looks like another call's header."""
    return "\n".join(margin + line for line in text.split("\n"))


def echo(text: str, *, isolates: bool = False, **kwargs: Any) -> None:
    """click.echo of `text` made safe (`guarded`, judgeloop's own isolates let through where
    `isolates`): what every command prints goes through here."""
    click.echo(guarded(text, isolates=isolates), **kwargs)


class _ShownRecord(logging.LogRecord):
    def getMessage(self) -> str:
        return guarded(super().getMessage())


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
        return guarded(format_warning(*args, **kwargs))

    return formatted


def text_lines(text: str, *, keepends: bool = False) -> list[str]:
    """`text`'s lines as a terminal breaks them: at "\\n" only. str.splitlines also breaks at \\r,
    \\x0b, \\x0c, \\x1c-\\x1e, \\x85, U+2028 and U+2029, so a diff split by it shows a line break
    where the text has none; here such a character stays in its line, shown as its escape."""
    lines = text.split("\n")
    if lines[-1] == "":  # the text ended in a line break (or is empty): no line after it
        lines.pop()
    if not keepends:
        return lines
    ended = [line + "\n" for line in lines]
    if ended and not text.endswith("\n"):
        ended[-1] = lines[-1]
    return ended
