"""What judgeloop reads from outside the project, and what its errors may show of it.

The project is the folder judgeloop runs in (DVC runs the stages there, and every command is run
there). A pull request can commit a symbolic link, so a config file read by a fixed name
(params.yaml, dvc.yaml, dvc.lock, a preset) could be a link to a file elsewhere on the machine, a
CI machine's credentials say, and every error quoting it would print its lines into a log. Such a
link is refused (refuse_link_out); a link that stays inside the project is read as before.

Data files may lie outside the project on purpose (a corpus on another disk), so they are read; but
an error about one names the file and the line and does not quote what is in it: no line of it, no
cell, no header column (quoted, yaml_problem, validation_problem). Inside the project an error
quotes as it always did.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import yaml
from pydantic import ValidationError

from pipeline.errors import ConfigError
from pipeline.llm.files import link_leading_out, named, path_under, replaced_by_copy

NOT_QUOTED = "(not quoted: the file lies outside the project)"


def inside_project(path: str | os.PathLike[str]) -> bool:
    """Whether `path` (relative to the project, or absolute) resolves, through any link, inside it."""
    try:
        return path_under(os.path.realpath(path), os.path.realpath(os.getcwd()))
    except (OSError, ValueError):  # a NUL in the name
        return False


def link_out(path: Path) -> str | None:
    """The message refusing `path` where it is (or passes through) a link to a file outside its
    project: the project when its name lies in it, else the folder its name is in (a params file
    named by JUDGELOOP_PARAMS elsewhere); None where it stays inside."""
    try:
        name = os.path.abspath(path)
        here = os.getcwd()
        base = here if path_under(name, here) else os.path.dirname(name)
        home = os.path.realpath(base)
        target = os.path.realpath(name)
        if path_under(target, home):
            return None
        link = link_leading_out(base, os.path.relpath(name, base)) or name
    except (OSError, ValueError):
        return None  # no file to read there (a NUL in its name): the reader says so
    if link == name:
        copy = replaced_by_copy(str(path))
        fix = f"replace the link with the file ({copy}), or with a link inside the project"
    else:  # a folder above it: copying a whole folder from elsewhere is not for us to suggest
        folder, leads = os.path.relpath(link, base), os.path.realpath(link)
        fix = (
            f"make {named(folder)} (a link to {named(leads)}) a folder of the project's own, or a link "
            "inside it"
        )
    return (
        f"{named(path)}: a link to {named(target)}, which lies outside the project ({named(home)}). "
        "judgeloop reads its config only from inside the project, so that no other file on this "
        f"machine is read (or quoted in an error) as one. Fix: {fix}."
    )


def refuse_link_out(path: Path) -> None:
    """ConfigError, naming the file and the fix, where `path` is a link out of its project."""
    message = link_out(path)
    if message is not None:
        raise ConfigError(message)


def quoted(path: str | os.PathLike[str], text: str) -> str:
    """`text`, taken from the file at `path`, as an error may show it: itself inside the project,
    NOT_QUOTED outside."""
    return text if inside_project(path) else NOT_QUOTED


def yaml_problem(path: str | os.PathLike[str], exc: Exception) -> str:
    """A YAML file's read error as an error message may give it: whole inside the project (PyYAML's
    text quotes the line, with a caret under the place); outside, only what is wrong and where.
    Another error (a byte that is not UTF-8) quotes nothing and is given whole."""
    if not isinstance(exc, yaml.YAMLError) or inside_project(path):
        return str(exc)
    problem = _QUOTED.sub(_unquoted, getattr(exc, "problem", None) or type(exc).__name__)
    mark = getattr(exc, "problem_mark", None)
    return f"{problem}, line {mark.line + 1}, column {mark.column + 1}" if mark is not None else problem


# PyYAML's problem quotes (%r) a token's name, a character, or a name from the file: an alias or a tag.
_QUOTED = re.compile(r"'([^']*)'|\"([^\"]*)\"")
_NOT_THE_FILE_S = re.compile(r"<[a-z ]+>|.|\\(?:[0abfnrtv\\]|x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})")


def _unquoted(match: re.Match[str]) -> str:
    """A quote in PyYAML's problem kept where it is a token's name or one character (a tab where a
    token starts, say), else NOT_QUOTED's words: an alias or tag is the file's own text."""
    inner = match[1] if match[1] is not None else match[2]
    return match[0] if _NOT_THE_FILE_S.fullmatch(inner) else "(not quoted)"


def validation_problem(path: str | os.PathLike[str], exc: ValidationError) -> str:
    """A pydantic error about a record read from `path`: whole inside the project (it quotes the
    values refused); outside, each field and what is wrong with it, without the value."""
    if inside_project(path):
        return str(exc)
    errors = exc.errors(include_input=False, include_url=False, include_context=False)
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'the record'}: {e['msg']}" for e in errors)
