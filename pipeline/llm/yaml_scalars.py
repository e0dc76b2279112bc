"""Plain YAML scalars that PyYAML reads otherwise than their writer, or DVC, means.

judgeloop reads params.yaml, dvc.yaml, dvc.lock and presets with PyYAML, which follows YAML 1.1 and
resolves a plain scalar's type from its text. Two ways that goes wrong:

- `unmade`: a scalar resolved to a number or a date (or given one with a tag) that the constructor
  then cannot make: `0x_` (a hex number with no digit), `2026-02-30` (no such day), a run of 5,000
  digits (past Python's int conversion limit), `!!bool maybe`. yaml.safe_load raised ValueError,
  KeyError or AttributeError, which no reader's handler of bad YAML caught; check_yaml
  (pipeline.llm.bounds) refuses it as bad YAML, with its line, before anything is composed.
- `read_apart`: a number YAML 1.1 and YAML 1.2 read apart. DVC reads params.yaml with ruamel.yaml,
  which follows YAML 1.2, and dvc.lock records DVC's reading:

      seed: 010     1.1: octal, 8            1.2 (dvc.lock): 10
      top_k: 1:30   1.1: base 60, 90         1.2 (dvc.lock): the text '1:30'

  so the stages computed with one value while dvc.lock recorded another, and a later edit to what the
  stages had read (`seed: 8`) was no change to DVC. params.yaml's reader refuses such a number. The
  other differences reach each field's own check as one value or are refused there with their line:
  `yes`/`on` (true against the text), `1e3` and `08` (text against the number it spells).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import yaml

_INT, _FLOAT = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
_ONE_1 = yaml.constructor.SafeConstructor()  # YAML 1.1's scalars, as PyYAML constructs them
# and as it resolves a plain one's type (typed here: PyYAML's stubs leave it untyped)
_RESOLVE: Callable[[type[yaml.Node], str, tuple[bool, bool]], str] = yaml.resolver.Resolver().resolve
_MADE: dict[str, tuple[str, Callable[[yaml.ScalarNode], Any]]] = {
    _INT: ("an integer", _ONE_1.construct_yaml_int),
    _FLOAT: ("a number", _ONE_1.construct_yaml_float),
    "tag:yaml.org,2002:bool": ("a boolean", _ONE_1.construct_yaml_bool),
    "tag:yaml.org,2002:timestamp": ("a date", _ONE_1.construct_yaml_timestamp),
}
# The plain scalars 1.1's resolver may give a type their text cannot make: a hex or binary number of
# no digit (`0x_`), a date (its fields' ranges), digits past Python's int conversion limit (4,300).
_MAY_BE_UNMADE = re.compile(r"[-+]?0[xb]_+$|[0-9]{4}-|[-+]?[0-9_]{4001}")  # 4001: LONG + 1
LONG = 4_000
# How each such scalar begins: a first look, cheap, for check_yaml's loop (it is taken at every
# scalar of dvc.lock, by each of its readers), before `unmade` is asked.
STARTS = "0123456789+-"
# YAML 1.1's octal form as PyYAML's constructor reads an int: with its underscores gone, a 0 first
# (a plain `010`, a tagged `!!int _010`); 1.2 reads it in tens
_OCTAL = re.compile(r"[-+]?_*0[0-7_]+")


def unmade(value: str, tag: str | None, plain: bool) -> str | None:
    """Why a scalar (as the parser gives it: its text, its tag if one was written, whether it was
    plain) cannot be made into the value its type says, or None."""
    if tag is None:
        if not plain or not _MAY_BE_UNMADE.match(value):
            return None  # quoted is text; every other plain scalar makes
        tag = _RESOLVE(yaml.ScalarNode, value, (True, False))
    if tag not in _MADE:
        return None  # text, null, or a tag the safe loader refuses by itself (a ConstructorError)
    kind, make = _MADE[tag]
    try:
        make(yaml.ScalarNode(tag, value))
    except (ValueError, LookupError, OverflowError, TypeError, AttributeError) as exc:
        shown = value if len(value) <= 40 else value[:40] + "..."
        return f"{shown!r} reads as {kind} but is none ({exc}). Fix: quote it if it is text"
    return None


def read_apart(root: yaml.Node | None) -> list[tuple[int, str, str, str]]:
    """Every scalar whose number YAML 1.1 and 1.2 read apart, in the file's order: (its line, its
    text, 1.1's reading, 1.2's reading), each reading as Python writes it."""
    found: list[tuple[int, str, str, str]] = []
    stack = [] if root is None else [root]
    while stack:  # the tree is bounded (pipeline.llm.bounds), but a walk needs no recursion
        node = stack.pop()
        if isinstance(node, yaml.MappingNode):
            stack += [part for pair in reversed(node.value) for part in reversed(pair)]
        elif isinstance(node, yaml.SequenceNode):
            stack += reversed(node.value)
        elif isinstance(node, yaml.ScalarNode) and (readings := _readings(node)) is not None:
            found.append((node.start_mark.line + 1, node.value, *readings))
    return found


def _readings(node: yaml.ScalarNode) -> tuple[str, str] | None:
    if node.tag not in (_INT, _FLOAT):
        return None
    text = node.value
    if ":" in text:  # base 60 (1.1 only): 1.2 has no such number, and reads the text
        return repr(_MADE[node.tag][1](node)), repr(text)
    if node.tag == _INT and _OCTAL.fullmatch(text):
        octal, tens = int(text.replace("_", ""), 8), int(text.replace("_", ""), 10)
        return None if octal == tens else (repr(octal), repr(tens))
    return None
