"""Limits on what a reader of someone else's file parses: nesting depth, YAML aliases, line length.

Every file judgeloop reads may come from someone else (pipeline.llm.cache.safe_disk's docstring), and
a parser given no bound can be made to crash or hang by a file a few kilobytes long:

- depth: orjson refuses JSON nested past 1,024 levels by itself, but a value 900 levels deep parses,
  and then every recursive walk over it (json.dumps for a checksum, pydantic, a report) raises
  RecursionError, a traceback that names neither the file nor the fix. `check_depth` refuses a
  parsed value deeper than MAX_DEPTH, walking it without recursion; YAML's composer recurses too,
  so `check_yaml` bounds a YAML document's depth before it is composed.
- aliases: a YAML "billion laughs" (`a: &a [x, x]`, `b: &b [*a, *a]`, ...) is a few lines that
  stand for 2^n nodes; composing shares them, but anything that walks the result (a duplicate-key
  check, validation, a dump) walks every expansion. `check_yaml` counts the nodes a document stands
  for, aliases expanded, from the parser's events (an iterative state machine, so neither depth nor
  aliases can blow its stack) and refuses past MAX_YAML_NODES, before anything walks it.
- lone surrogates: a JSON escape `\\ud800` (and a YAML one, through PyYAML's own loader) stands for
  half of a character, which Python's json module and PyYAML let into a str. No UTF-8 file can hold
  it: written into a recording, the cache or an output, it breaks the write (or, written as WTF-8,
  every later read), and it cannot even be hashed into a cache key. `surrogate_problem` finds one
  in a parsed value, so that every reader refuses it where it enters, naming the file and line, and
  a backend's reply holding one is a failed call.
- unmade scalars: `check_yaml` also refuses a scalar PyYAML takes for a number or a date that its
  constructor cannot make (`0x_`, `2026-02-30`: a ValueError, no YAMLError; pipeline.llm.yaml_scalars).
- line length: `bounded_lines` reads a file a line at a time and refuses a line past its bound
  before reading the rest of it, so a 200 MB line costs at most the bound in memory, not several
  times its size (bytes, text, split lines, parsed value); `long_line` finds such a line in bytes
  already read, before they are decoded and split.

Each bound is far above what judgeloop itself writes or needs: the deepest value it writes (a JSON
Schema in a request's `format`) is under ten levels, params.yaml under six.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import orjson
import yaml

from pipeline.llm.files import open_regular
from pipeline.llm.yaml_scalars import LONG, STARTS, unmade

MAX_DEPTH = 64
MAX_YAML_NODES = 1_000_000
MAX_LINE_BYTES = 16 * 2**20
_PARSER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def depth_problem(value: Any, limit: int = MAX_DEPTH) -> str | None:
    """Why `value` (parsed JSON) is too deep to walk safely, or None. Iterative: no recursion."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        if depth > limit:
            return f"nested more than {limit} levels deep, which judgeloop never writes"
        for child in children:  # a loop, not a generator: this runs for every line a reader reads
            if isinstance(child, _CONTAINERS):
                stack.append((child, depth + 1))
    return None


_CONTAINERS = (dict, list)


SURROGATE_FIX = (
    "write the character itself (or its escape: in JSON a pair, \\ud83d\\ude00 for one emoji; in YAML "
    "\\U0001f600); an escape \\ud800 to \\udfff alone stands for half a character"
)


def surrogate_problem(value: Any) -> str | None:
    """Where `value` (parsed JSON or YAML: str, list, dict keys and values) holds a lone surrogate,
    which no UTF-8 file can hold, said for a message; or None. Iterative: no recursion."""
    try:  # in C: orjson writes only UTF-8, so a value it writes holds no lone surrogate anywhere
        orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
        return None
    except orjson.JSONEncodeError:  # one, or what orjson does not write (a set, bytes, a deep value)
        return _surrogate_walk(value)


def _surrogate_walk(value: Any) -> str | None:
    """surrogate_problem, in Python: where the first lone surrogate is, for the message."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, str):
            if not node.isascii() and (at := _surrogate_at(node)) is not None:
                where = f" in {path.removeprefix('.')}" if path else ""
                return (
                    f"a lone surrogate (\\u{ord(node[at]):04x}, half a character, which no UTF-8 file "
                    f"can hold) at character {at + 1}{where}"
                )
        elif isinstance(node, dict):
            for key, child in node.items():
                stack.append((key, path))
                stack.append((child, f"{path}.{key}" if isinstance(key, str) and key.isascii() else path))
        elif isinstance(node, list | tuple):
            stack.extend((child, f"{path}[{n}]") for n, child in enumerate(node))
    return None


def _surrogate_at(text: str) -> int | None:
    try:
        text.encode("utf-8")  # in C, far faster than a scan in Python; only a surrogate can fail it
    except UnicodeEncodeError as exc:
        return exc.start
    return None


class YAMLBoundError(yaml.MarkedYAMLError):
    """A YAML document past a bound: a yaml.YAMLError with the mark of where, so every reader's own
    handler of bad YAML names the file and line."""

    def __init__(self, problem: str, mark: Any) -> None:  # libyaml's Mark or PyYAML's: line, column
        super().__init__(problem=problem, problem_mark=mark)


def check_yaml(text: str, *, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_YAML_NODES) -> None:
    """Refuse (YAMLBoundError) a YAML text nested deeper than `max_depth`, standing for more than
    `max_nodes` nodes with its aliases expanded, or holding a lone surrogate in a scalar. A syntax
    error is left to the caller's own loader, which says it as it always has."""
    try:
        _check_events(yaml.parse(text, Loader=_PARSER), max_depth, max_nodes)
    except YAMLBoundError:
        raise
    except yaml.YAMLError:
        # libyaml refuses what PyYAML's own loader (yaml.safe_load, every caller's) reads: an escape
        # of a lone surrogate, and nesting past libyaml's own limit (1,000), where PyYAML's composer
        # then recurses into a RecursionError. So the text is read again with PyYAML's parser (an
        # iterative state machine too), to refuse those here; only a file already refused pays.
        if _PARSER is not yaml.SafeLoader:
            _check_pure(text, max_depth, max_nodes)


def _check_pure(text: str, max_depth: int, max_nodes: int) -> None:
    try:
        _check_events(yaml.parse(text, Loader=yaml.SafeLoader), max_depth, max_nodes)
    except YAMLBoundError:
        raise
    except yaml.YAMLError:
        return


def _check_events(events: Iterator[yaml.Event], max_depth: int, max_nodes: int) -> None:
    depth = 0
    total = 0
    sizes: dict[str, int] = {}  # anchor -> the nodes it stands for
    open_nodes: list[tuple[str | None, int]] = []  # (anchor, total when it started)
    for event in events:
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            total += 1
            open_nodes.append((event.anchor, total))
            if depth > max_depth:
                raise YAMLBoundError(f"nested more than {max_depth} levels deep", event.start_mark)
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
            anchor, started = open_nodes.pop()
            if anchor is not None:
                sizes[anchor] = total - started + 1
        elif isinstance(event, yaml.ScalarEvent):
            total += 1
            if (problem := _scalar_problem(event)) is not None:
                raise YAMLBoundError(problem, event.start_mark)
            if event.anchor is not None:
                sizes[event.anchor] = 1
        elif isinstance(event, yaml.AliasEvent):
            total += sizes.get(event.anchor or "", 1)
        if total > max_nodes:
            raise YAMLBoundError(
                f"its aliases expand to more than {max_nodes:,} values (an alias bomb?)", event.start_mark
            )


def _scalar_problem(event: yaml.ScalarEvent) -> str | None:
    """Why a scalar is refused: a lone surrogate, or a tag or a plain number or date 1.1's way
    (`0x_`, `2026-02-30`, 5,000 digits) that PyYAML's constructor cannot make (its ValueError, no
    YAMLError, was a traceback in every reader). The second is looked at first, cheaply: this runs
    for every scalar of dvc.lock, by each of its readers."""
    value, tag = event.value, event.tag
    if (half := surrogate_problem(value)) is not None:
        return f"{half}. Fix: {SURROGATE_FIX}"
    if tag is not None or (value[:1] in STARTS and ("_" in value or value[4:5] == "-" or len(value) > LONG)):
        return unmade(value, tag, event.implicit[0])
    return None


def long_line(data: bytes, limit: int = MAX_LINE_BYTES) -> int | None:
    """The number of the first line of `data` longer than `limit` bytes, or None: a check made on the
    bytes as read, before decoding, splitting and parsing cost several times their size."""
    if len(data) <= limit:
        return None
    start, number = 0, 1
    while True:
        end = data.find(b"\n", start)
        if (end if end >= 0 else len(data)) - start > limit:
            return number
        if end < 0:
            return None
        start, number = end + 1, number + 1


class LineTooLong(ValueError):
    def __init__(self, number: int, limit: int) -> None:
        super().__init__(
            f"line {number} is longer than {limit:,} bytes, far more than a line judgeloop reads"
        )
        self.number, self.limit = number, limit


def bounded_lines(source: Path | IO[bytes], limit: int = MAX_LINE_BYTES) -> Iterator[tuple[int, bytes]]:
    """(number, line without its b"\\n") for every line of the file; LineTooLong at the first line
    longer than `limit`, read no further than the bound. `source`: a path, opened once as a regular
    file (pipeline.llm.files.open_regular: a pipe put at the path after a caller's look is refused,
    NotARegularFile, an OSError, never waited on); or a file its caller opened so, read from where
    it stands (so that two passes read one file, whatever is renamed to its path between them)."""
    if not isinstance(source, Path):
        yield from _numbered(source, limit)
        return
    with open_regular(source) as handle:
        yield from _numbered(handle, limit)


def _numbered(handle: IO[bytes], limit: int) -> Iterator[tuple[int, bytes]]:
    number = 0
    while True:
        raw = handle.readline(limit + 1)
        if not raw:
            return
        number += 1
        if len(raw) > limit and not (len(raw) == limit + 1 and raw.endswith(b"\n")):
            raise LineTooLong(number, limit)
        yield number, raw.removesuffix(b"\n")
