"""What `judgeloop audit` prints of a model's reply on a terminal: control characters made visible.

A reply is whatever the model wrote, and a model (or a prompt-injected document it quotes) can write
terminal escape sequences: `ESC [2J` clears the screen, `ESC [1A` and a carriage return overwrite
lines already printed, an OSC sequence sets the window title or a hyperlink, and Unicode's bidi
overrides make text read in another order than it is stored. Printed raw, a reply could hide
itself or fake the audit's own lines. So every control character but the newline and the tab (C0,
DEL, C1) and every bidi control is shown as its escape, `\\x1b`, `\\r`, `\\u202e`; `--raw` prints
the text as recorded, and `--format jsonl` is JSON, escaped by its own rules.
"""

from __future__ import annotations

import re

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}]")
_NAMED = {"\r": "\\r", "\x0b": "\\v", "\x0c": "\\f", "\x08": "\\b", "\x00": "\\0"}


def _visible(match: re.Match[str]) -> str:
    char = match[0]
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """`text` with every control character but newline and tab shown as its escape."""
    return _UNSAFE.sub(_visible, text)
