"""`-S section.key=value` checked by judgeloop before DVC sees it: an unknown key is refused with
the nearest known one, where DVC would add the typo to params.yaml as a new key and run with the
old value.

    judgeloop exp -S refine.treshold=4
    Error: -S refine.treshold=4: params.yaml has no key 'treshold' under refine; did you mean
    'threshold'? (known under refine: ...)
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from pydantic import BaseModel

from pipeline.errors import JudgeloopError
from pipeline.experiments.params import params_model
from pipeline.llm.params_errors import _models_in, _names
from pipeline.llm.settings import params_path, read_params_file

SET_FLAGS = ("-S", "--set-param")


def set_params(args: Sequence[str]) -> list[str]:
    """The `key=value` of every -S/--set-param in `dvc exp run`'s arguments, as DVC's own parser reads
    them: argparse also takes an abbreviation (`--set k=v`, `--se=k=v`) and a -S among short flags
    (`-fS k=v`), which a reading by hand missed, so that the -S reached DVC unchecked. Where DVC's
    parser refuses the arguments (DVC says why when it runs), as written."""
    import argparse
    import contextlib
    import io

    from dvc.cli.parser import get_main_parser

    def refuse(message: str) -> NoReturn:  # not DVC's: it logs the error, then the run says it again
        raise ValueError(message)

    # DVC's parser is built once (lru_cache) and used again by the run itself: its error is put back
    commands = [a for a in get_main_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    experiments = [
        a for a in commands[0].choices["exp"]._actions if isinstance(a, argparse._SubParsersAction)
    ]
    run = experiments[0].choices["run"]
    run.error = refuse
    try:  # -h prints DVC's help and exits: DVC's run prints it, once
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            read, _ = run.parse_known_args(list(args))
    except (ValueError, SystemExit):
        return _as_written(args)
    finally:
        del run.error
    return list(read.set_param or [])


def _as_written(args: Sequence[str]) -> list[str]:
    """The `key=value` of every -S/--set-param (either as the next argument or after '=')."""
    found, pending = [], False
    for arg in args:
        if pending:
            found.append(arg)
            pending = False
        elif arg in SET_FLAGS:
            pending = True
        elif arg.startswith("--set-param="):
            found.append(arg.removeprefix("--set-param="))
        elif arg.startswith("-S") and len(arg) > 2:
            found.append(arg[2:].removeprefix("="))
    return found


def names_params(file: str, params: Path = Path("params.yaml")) -> bool:
    """Whether DVC's `-S FILE:key=value` writes `params` (`params.yaml`, `./params.yaml`, its path
    from the root, through `..`): DVC opens FILE as given, so each is the file a stage reads."""
    import os

    if os.path.normpath(file) == os.path.normpath(params):
        return True
    try:
        return os.path.samefile(file, params)
    except (OSError, ValueError):  # no such file (DVC says so when it runs), or a NUL in the name
        return False


def unknown_part(model: type[BaseModel], parts: Sequence[str]) -> tuple[int, list[str]] | None:
    """(index of the first part that is no key there, the keys known there), or None when every
    part is known (or the path goes below a mapping whose keys are free, like llm.options)."""
    models = [model]
    for index, part in enumerate(parts):
        known = sorted({name for m in models for name in _names(m)})
        if not known:
            return None
        if part not in known:
            return index, known
        models = [
            sub
            for m in models
            for name, info in m.model_fields.items()
            if part in (name, info.alias)
            for sub in _models_in(info.annotation)
        ]
    return None


def _as_llm(parts: list[str]) -> list[str]:
    """llm_overrides.DESIGN.key... is checked as llm.key... (the design's name is free)."""
    if len(parts) >= 3 and parts[0] == "llm_overrides":
        return ["llm", *parts[2:]]
    return parts


def _in_file(data: Any, parts: Sequence[str]) -> bool:
    """Whether params.yaml already has this key (DVC then changes its value)."""
    for part in parts:
        if not isinstance(data, dict) or part not in data:
            return False
        data = data[part]
    return True


def _params_file() -> dict[str, Any]:
    """params.yaml as written (none readable: {}; the stage that reads it says what is wrong)."""
    try:
        return read_params_file(Path(params_path()), environ={})
    except (JudgeloopError, OSError):
        return {}


def check_set_params(args: Sequence[str]) -> None:
    """Refuse a -S whose key neither params.yaml nor its model has, naming the nearest known key.
    A key the file has is DVC's to change, whatever the project (a DVC project of any shape)."""
    model = params_model()
    written = _params_file()
    for assignment in set_params(args):
        key, equals, _ = assignment.partition("=")
        if not equals and not key.rpartition(":")[2].startswith("~"):  # Hydra's ~key deletes, no value
            raise JudgeloopError(f"-S {assignment}: give it as -S section.key=value")
        if ":" in key:  # DVC's file:key form: another params file is not ours to check
            file, _, key = key.partition(":")
            if not names_params(file, Path(params_path())):
                continue
        key = key.lstrip("+~")  # DVC's (Hydra's) forms: +key adds a key, ~key removes one
        parts = key.split(".")
        if _in_file(written, parts):
            continue
        mapped = _as_llm(parts)
        unknown = unknown_part(model, mapped)
        if unknown is None:
            continue
        index, known = unknown
        index += len(parts) - len(mapped)  # back to the key as given
        where = ".".join(parts[:index]) or "the top level"
        near = difflib.get_close_matches(parts[index], known, n=1, cutoff=0.6)
        hint = f"; did you mean '{'.'.join([*parts[:index], near[0]])}'?" if near else ""
        raise JudgeloopError(
            f"-S {assignment}: params.yaml has no key '{parts[index]}' under {where}{hint} "
            f"(known there: {', '.join(known)}). DVC would add it as a new key and change nothing."
        )
