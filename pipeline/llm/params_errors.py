"""Where a params.yaml problem is: the file and line of the value pydantic refused, and for an
unknown key the nearest known one ("did you mean").

pydantic reports a location as a path of names and indices (`llm.options.temperature`,
`rag.dimensions.2.weight`); the YAML file's node tree, from yaml.compose, carries each node's line,
so the path is walked there. A value that an environment variable set is named by the variable, not
by a line of the file.
"""

from __future__ import annotations

import difflib
import re
import types
from collections.abc import Mapping, Sequence
from typing import Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, RootModel, ValidationError
from pydantic_core import ErrorDetails

Location = tuple[int | str, ...]


def compose(text: str) -> yaml.Node | None:
    """The file's node tree (lines included), or None if it cannot be read as YAML."""
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None


def duplicate_keys(node: yaml.Node | None) -> list[tuple[int, str, int]]:
    """Every key given twice in one mapping, anywhere in the tree: (its line, the key, the line it
    was first given on), in the order of the file."""
    found: list[tuple[int, str, int]] = []
    if isinstance(node, yaml.MappingNode):
        first: dict[str, int] = {}
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                line = key.start_mark.line + 1
                if key.value in first:
                    found.append((line, key.value, first[key.value]))
                first.setdefault(key.value, line)
            found += duplicate_keys(value)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            found += duplicate_keys(item)
    return sorted(found)


_UNKNOWN_NAME = re.compile(r"unknown \w+ '([^']+)'")


def line_of(root: yaml.Node | None, loc: Location, message: str = "") -> int | None:
    """The 1-based line of the node at `loc`: the key's line in a mapping, the item's in a list; as
    deep as the file goes (a key the file lacks gives its parent's line). Parts of a pydantic
    location that name no node (a union member's tag, such as `str`) are passed over. A message
    about an unknown name in a list or map points at the line where that name is written."""
    node, line = root, None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == str(part):
                    node, line = value, key.start_mark.line + 1
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
    named = _UNKNOWN_NAME.search(message)
    if named and node is not None and (where := _scalar_line(node, named[1])) is not None:
        return where
    return line


def _scalar_line(node: yaml.Node, value: str) -> int | None:
    if isinstance(node, yaml.ScalarNode):
        return node.start_mark.line + 1 if node.value == value else None
    children: list[yaml.Node] = []
    if isinstance(node, yaml.MappingNode):
        children = [child for pair in node.value for child in pair]
    elif isinstance(node, yaml.SequenceNode):
        children = list(node.value)
    for child in children:
        if (line := _scalar_line(child, value)) is not None:
            return line
    return None


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models a field's annotation may hold: through Optional, unions, tuples and lists, and a
    RootModel's root."""
    if isinstance(annotation, type) and issubclass(annotation, RootModel):
        return _models_in(annotation.model_fields["root"].annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = get_origin(annotation)
    if origin is None:
        return []
    if origin in (Union, types.UnionType, tuple, list, Sequence) or origin.__name__ == "Annotated":
        return [m for arg in get_args(annotation) for m in _models_in(arg)]
    return []


def _names(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def known_keys(model: type[BaseModel], loc: Location) -> list[str]:
    """The keys the mapping at `loc` (a location without its last part) may hold."""
    models = [model]
    for part in loc:
        if isinstance(part, int):
            continue  # an index into a list: the same item models
        found = []
        for candidate in models:
            for name, info in candidate.model_fields.items():
                if part in (name, info.alias):
                    found += _models_in(info.annotation)
        if not found:
            continue  # a union member's tag, not a key
        models = found
    return sorted({name for m in models for name in _names(m)})


def _got(error: ErrorDetails) -> str:
    value = error.get("input")
    if isinstance(value, Mapping | list) or error["type"] == "missing":
        return ""
    shown = repr(value)
    return f" (got {shown[:60] + '...' if len(shown) > 60 else shown})"


def describe(error: ErrorDetails, model: type[BaseModel], quote: bool = True) -> str:
    """One problem in words: where (dotted), what, and for an unknown key the nearest known one;
    the value refused too where `quote` (not for a file outside the project: pipeline.llm.project_files)."""
    loc = tuple(error["loc"])
    where = ".".join(str(p) for p in loc) or "the file"
    if error["type"] == "extra_forbidden":
        known = known_keys(model, loc[:-1])
        near = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
        hint = f"; did you mean '{near[0]}'?" if near else ""
        return f"{where}: unknown key{hint} (known here: {', '.join(known)})"
    message = error["msg"].removeprefix("Value error, ")
    return f"{where}: {message}{_got(error) if quote else ''}"


def params_problems(
    exc: ValidationError,
    model: type[BaseModel],
    shown: str,
    text: str | None,
    overridden: Mapping[tuple[str, str], str],
    quote: bool = True,
) -> list[str]:
    """Each problem as `file:line: where: what`, or naming the environment variable that set it; a
    value from the file is quoted only where `quote`."""
    root = compose(text) if text is not None else None
    found: list[tuple[int, str]] = []
    for error in exc.errors(include_url=False):
        loc = tuple(error["loc"])
        variable = overridden.get((str(loc[0]), str(loc[1]))) if len(loc) >= 2 else None
        if variable is not None:
            found.append((0, f"{variable} (sets {loc[0]}.{loc[1]}): {describe(error, model)}"))
            continue
        problem = describe(error, model, quote)
        line = line_of(root, loc, problem)
        found.append((line or 0, f"{shown}:{line}: {problem}" if line is not None else f"{shown}: {problem}"))
    return [problem for _, problem in sorted(found, key=lambda entry: entry[0])]


def check_names(given: Sequence[str], known: Sequence[str], what: str) -> None:
    """Refuse names that are not among `known` (each with the nearest known one), and repeats."""
    problems = []
    for name in dict.fromkeys(given):
        if name not in known:
            near = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            problems.append(f"unknown {what} {name!r}" + (f", did you mean {near[0]!r}?" if near else ""))
    repeated = sorted({name for name in given if list(given).count(name) > 1})
    if repeated:
        problems.append(f"{what} named twice: {', '.join(repeated)}")
    if problems:
        raise ValueError(f"{'; '.join(problems)} (known {what}s: {', '.join(known)})")
