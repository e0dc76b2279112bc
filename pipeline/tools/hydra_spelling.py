"""A value spelled in Hydra's override grammar, the way DVC reads `-S key=value`
(dvc.utils.hydra.apply_overrides: Hydra parses it, OmegaConf resolves it), such that it makes the
same value again. `str(value)` is no such spelling: "\\n" stays two characters, `${oc.env:NAME}`
copies an environment variable, a comma makes a sweep.

    text        '...' quoted. Hydra un-escapes only at a quote: a run of n backslashes before a quote
                inside stands for (n-1)/2 and the quote, before the closing quote for n/2; every
                other character, a newline included, is itself. OmegaConf un-escapes only at `${`
                (`\\${` is the text `${`, `\\\\${` a backslash and an interpolation), so each `${`
                is written `\\${`, with the backslashes before it doubled: nothing is interpolated
    numbers     Python's repr (nan, inf, -inf, -0.0 and 1e-05 are all Hydra FLOATs)
    true/false/null, [a,b], {key:value}

A key (`section.key`) and a mapping's keys are written bare; what the grammar cannot name is refused
(UnspellableValue), as is a value of any other type (a date, a set).
"""

from __future__ import annotations

import re
from typing import Any

_PART = r"(?:[A-Za-z_$][A-Za-z0-9_$-]*|0|[1-9][0-9]*)"
_KEY = re.compile(rf"{_PART}(?:\.{_PART})*")  # Hydra's key: KEY_SPECIAL or INT_UNSIGNED, by dots
# A mapping's key inside a value (Hydra's dictKey): an ID no keyword takes (`null: 1` would come
# back as the key None, `1: a` as the number 1)
_DICT_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_KEYWORDS = {"null", "true", "false", "nan", "inf"}
_BEFORE_QUOTE = re.compile(r"(\\*)'")
_AT_END = re.compile(r"(\\*)$")
_INTERPOLATION = re.compile(r"(\\*)\$\{")


class UnspellableValue(ValueError):
    """A key or value Hydra's grammar has no spelling for; its text says why and the fix."""


def spelled(value: Any) -> str:
    """`value` in Hydra's override grammar, such that DVC's apply_overrides makes `value` again."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return quoted(value)
    if isinstance(value, list):
        return "[" + ",".join(spelled(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{_dict_key(key)}:{spelled(item)}" for key, item in value.items()) + "}"
    raise UnspellableValue(
        f"{value!r} is a {type(value).__name__}, none of text, number, true/false, null, list or mapping. "
        "Fix: quote it if it is text"
    )


def quoted(text: str) -> str:
    """Text as a Hydra quoted string that Hydra takes whole and OmegaConf does not interpolate."""
    text = _INTERPOLATION.sub(lambda m: m[1] * 2 + "\\${", text)
    text = _BEFORE_QUOTE.sub(lambda m: m[1] * 2 + "\\'", text)
    return "'" + _AT_END.sub(lambda m: m[1] * 2, text, count=1) + "'"


def _dict_key(key: Any) -> str:
    if not isinstance(key, str) or not _DICT_KEY.fullmatch(key) or key.lower() in _KEYWORDS:
        raise UnspellableValue(
            f"the mapping's key {key!r} has no spelling in DVC's -S (Hydra's grammar takes letters, digits, "
            "'_' and '-', not starting with a digit, and no null/true/false/nan/inf). Fix: set that key "
            "on a line of its own (section.key.name: value), or edit params.yaml by hand"
        )
    return key


def overrides(key: Any, value: Any, present: bool = True) -> list[str]:
    """The overrides that set `key` to `value`, added where params.yaml lacks it (`++`). A mapping or
    a list replaces what is there (`key=null` first, where params.yaml has the key: `present`), as a
    number does: Hydra would merge a mapping into one (keeping keys the preset does not give) and
    refuse a list over a mapping. The null is spelled without `++` because Hydra's sweeper, which
    DVC's `--queue` runs whenever another -S is a sweep, keeps one override per key as written:
    `++key=null` then `++key={...}` would lose the null, and the mapping be merged."""
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise UnspellableValue(
            f"the key {key!r} is no params.yaml key DVC's -S can name (section.key: letters, digits, '_', "
            "'-' and '$', parts joined by dots). Fix: name the key as params.yaml spells it"
        )
    value_text = spelled(value)
    first = [f"{key}=null"] if present and isinstance(value, dict | list) else []
    return [*first, f"++{key}={value_text}"]
