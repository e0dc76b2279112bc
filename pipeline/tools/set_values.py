"""A user's own `-S section.key=value` on `judgeloop exp`: the value DVC reads from what was typed
(Hydra's override grammar, as DVC documents `-S`) reaches params.yaml, as a stage reads it, exactly;
or it is refused before anything runs, naming the -S, the value and the fix.

What DVC reads from what was typed (Hydra's grammar; a `${...}` refused; a sweep's runs; what the
values mean) is pipeline.tools.set_grammar's. Here, what lands in params.yaml and what a stage
would read of it:
- DVC writes the whole of params.yaml again (ruamel, YAML 1.2) and a stage reads it with PyYAML
  (YAML 1.1): text DVC writes plain (`no`, `1:30`), a float it writes `1e-05`, would come back
  otherwise; and every other value of the file is written again, a `${...}` in it resolved and
  quotes YAML 1.2 does not need dropped. So DVC's own apply_overrides is run on a copy of
  params.yaml (pipeline.tools.preset_values.landed) and what a stage would read is set against what
  Hydra's grammar made of the values typed, in type and value; with a sweep (`--queue`), each run.
- A value Hydra reads as a kind judgeloop's params model does not take there (`-S llm.model=7`, a
  number) is refused with the quoting that gives text, not left to fail a stage once DVC has begun.
- The rewrite also lays the file out DVC's way (comments inside a list dropped, flow lists made
  block): values unchanged, so it is said as a warning, with the lines, not refused.
"""

from __future__ import annotations

import difflib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from pipeline.errors import JudgeloopError
from pipeline.llm.terminal import guarded
from pipeline.tools.preset_values import BY_HAND, MISSING, first_difference, landed
from pipeline.tools.set_grammar import (
    DVC_PARAMS,
    covers,
    interpolates,
    meant,
    refuse_interpolation,
    sweep_runs,
)


def check_set_values(
    typed: Sequence[str], preset: Sequence[str] = (), params: Path = Path(DVC_PARAMS)
) -> None:
    """Refuse (JudgeloopError, a click error) a -S in `typed` (the user's own `key=value`s, after the
    `preset`'s) that DVC's grammar cannot read, that resolves a `${...}`, or whose value a stage would
    not read back as typed; or, with them, any other value of `params` DVC's rewrite would change.
    Say, as a warning, what else of the file's text the rewrite would change."""
    from dvc.utils.cli_parse import to_path_overrides

    from pipeline.tools.set_params import names_params

    by_file = to_path_overrides(typed)
    for file, overrides in by_file.items():
        _refuse_outside(file, overrides[0])
        for override in overrides:
            refuse_interpolation(override, file)
    # `./params.yaml:key=value` writes params.yaml as `key=value` does (DVC applies each file's in turn)
    mine = [
        o
        for file, overrides in by_file.items()
        if os.path.normpath(file) == DVC_PARAMS or names_params(file, params)  # `params` stands for it
        for o in overrides
    ]
    if not mine or not params.is_file():
        return
    from pipeline.llm.settings import params_text

    text = params_text(params)
    before = landed(text, [])
    if isinstance(before, str):
        raise JudgeloopError(f"{params} as it is now: {before}. Fix params.yaml first.")
    _refuse_held_interpolation(before, f"-S {' -S '.join(mine)}")
    _check_runs(text, before, mine, preset)
    _warn_relaid(text)


def _check_runs(text: str, before: dict[str, Any], mine: list[str], preset: Sequence[str]) -> None:
    """Each run DVC makes of the overrides checked; a sweep's refusal names the sweep typed too (its
    run's `-S key=no` alone, and a fix for it, would lose the other runs)."""
    runs = sweep_runs([*preset, *mine])
    for run in runs:
        try:
            _refuse_mistyped(text, before, _check_run(text, before, run), run, preset)
        except JudgeloopError as refused:
            if len(runs) == 1:
                raise
            sweep = " -S ".join(o for o in mine if o not in run)
            raise JudgeloopError(f"-S {sweep}, in its run {refused.message}") from None


def _refuse_outside(file: str, override: str) -> None:
    """`-S FILE:key=value` whose FILE lies outside the project (`../x.yaml`, an absolute path, a link
    out) refused: DVC rewrites it there, then fails to add it to git, and leaves the git index broken
    ("invalid data in index"); nothing the experiment puts back."""
    from pipeline.llm.project_files import inside_project

    if not inside_project(file):
        raise JudgeloopError(
            f"-S {file}:{override}: {file} lies outside the project ({Path.cwd()}), where DVC's -S would "
            "rewrite it and then fail, leaving git's index broken. Fix: copy the file into the project "
            "(and list it in dvc.yaml's params), then give -S its path there"
        )


def refuse_held_interpolation(params: Path, said: str) -> None:
    """`_refuse_held_interpolation` for what `said` (`--preset FILE`) makes DVC write params.yaml
    again with, before a preset's values are tried on a copy of it (pipeline.tools.preset_values)."""
    from pipeline.llm.settings import params_text

    if params.is_file() and not isinstance(before := landed(params_text(params), []), str):
        _refuse_held_interpolation(before, said)


def _refuse_held_interpolation(before: Any, said: str, where: str = "") -> None:
    """A `${...}` params.yaml itself holds refused before DVC's rewrite is tried on it: resolving it
    writes (an environment variable's value) into the file, and where resolving fails, OmegaConf's
    error quotes what it got (`${oc.create:${oc.env:X}}` quotes X's value)."""
    from pipeline.tools.preset_values import _said as said_of_params

    if isinstance(before, str) and interpolates(before):
        raise JudgeloopError(f"{said}: {said_of_params({}, where, before, MISSING)}")
    items = (
        before.items() if isinstance(before, dict) else enumerate(before) if isinstance(before, list) else ()
    )
    for key, value in items:
        _refuse_held_interpolation(value, said, f"{where}.{key}" if where else str(key))


def _check_run(text: str, before: dict[str, Any], run: list[str]) -> dict[str, Any]:
    """params.yaml after the run's overrides, as a stage reads it; or a click error naming why not."""
    after = landed(text, run)
    if isinstance(after, str):
        raise _refused_by_dvc(text, run, after)
    difference = _difference(before, run, after)
    if difference is None:
        return after
    where, wanted, got = difference
    typed = next((o for o in reversed(run) if covers(o, where)), None)
    if typed is None or (isinstance(wanted, str) and "${" in wanted):
        # any -S would do it: params.yaml itself holds what DVC's rewrite changes (what a `${...}` of
        # it resolves to never said: an environment variable's value, a token in a CI log)
        from pipeline.tools.preset_values import _said as said_of_params

        raise JudgeloopError(f"-S {' -S '.join(run)}: {said_of_params({}, where, wanted, got)}")
    instead = _instead(text, before, run, typed, where, wanted, got)
    raise JudgeloopError(
        f"-S {typed}: DVC's -S reads the value as {_shown(wanted)}, but writes params.yaml so that a stage "
        f"would read {_shown(got)} at {where} (DVC writes YAML 1.2, the stages read YAML 1.1). Fix: "
        f"{instead}dit params.yaml by hand for this value{_by_hand(wanted)} (and commit it): DVC's -S "
        "cannot carry it"
    )


def _refused_by_dvc(text: str, run: list[str], why_together: str) -> JudgeloopError:
    """DVC's refusal of the run's overrides: the override it refuses alone named; else all of them."""
    named = [(o, why) for o in run if isinstance(why := landed(text, [o]), str)]
    override, why = named[0] if named else (" -S ".join(run), why_together)
    return JudgeloopError(f"-S {override}: {why}. {_fix_for(text, run, why, override)}")


def _by_hand(wanted: Any) -> str:
    """How a float DVC writes as `1e-05` (text to YAML 1.1) is written so that both YAMLs read it."""
    if not isinstance(wanted, float) or "e" not in repr(wanted) or "." in repr(wanted):
        return ""
    mantissa, exponent = repr(wanted).split("e")
    return f" (written {mantissa}.0e{exponent}, a float to both YAMLs, which DVC then keeps)"


def _difference(before: dict[str, Any], run: list[str], after: dict[str, Any]) -> tuple[str, Any, Any] | None:
    """Where what a stage would read first differs from what Hydra's grammar means, or None."""
    try:
        return first_difference(meant(before, run), after)
    except Exception as exc:  # Hydra on params.yaml as a stage reads it (YAML 1.1) refuses what DVC took
        cause = exc.__cause__ or exc
        raise JudgeloopError(
            f"-S {' -S '.join(run)}: params.yaml reads otherwise to DVC (YAML 1.2) than to the stages (YAML "
            f"1.1) where these values go ({type(cause).__name__}: {cause}). Fix: write those keys and values "
            "of params.yaml so that both read them alike (quote text such as yes, no, on, off)"
        ) from None


def _instead(
    text: str, before: dict[str, Any], run: list[str], typed: str, where: str, wanted: Any, got: Any
) -> str:
    """ "if you meant GOT, give -S KEY=GOT; else e" where that -S would carry GOT exactly; else "E"."""
    from pipeline.tools.hydra_spelling import UnspellableValue, spelled

    key = typed.partition("=")[0]
    if key.lstrip("+~") != where or got is MISSING or (isinstance(got, str) and not isinstance(wanted, str)):
        return "E"  # text is never what a number typed meant (1e300 that a stage would read '1e+300')
    try:
        other = f"{key}={spelled(got)}"
    except UnspellableValue:
        return "E"
    if not _carried(text, before, [other if o == typed else o for o in run], where):
        return "E"
    return f"if you meant {got!r}, give -S {for_shell(other)}; else e"


def _carried(text: str, before: dict[str, Any], run: list[str], where: str) -> bool:
    """Whether DVC carries `run` exactly and the params model takes what lands at `where` (an offered
    fix is one the check itself would pass: `llm.model=on` is not offered `llm.model=true`)."""
    after = landed(text, run)
    if isinstance(after, str) or first_difference(meant(before, run), after) is not None:
        return False
    return where not in _model_errors(after) or where in _model_errors(before)


def _refuse_mistyped(
    text: str, before: dict[str, Any], after: Any, run: list[str], preset: Sequence[str]
) -> None:
    """A typed value judgeloop's params model refuses where it took params.yaml's (Hydra's grammar
    made `-S llm.model=7` the number 7, which no stage takes as a model's name) refused now, with the
    quoting that gives text, rather than by a stage once DVC has started the experiment."""
    new = _model_errors(after)
    old = _model_errors(before)
    for where, (value, wants) in new.items():
        said = next((o for o in run if o not in preset and covers(o, where)), None)
        if where in old or said is None:
            continue
        fix = _mistyped_fix(text, before, run, said, where, (value, wants))
        raise JudgeloopError(
            f"-S {said}: DVC's -S reads the value as {value!r}, which a stage refuses at {where} ({wants}). "
            f"Fix: {fix}"
        )


def _mistyped_fix(
    text: str, before: dict[str, Any], run: list[str], said: str, where: str, refused: tuple[Any, str]
) -> str:
    """The fix for the -S `said` whose value the params model refuses at `where` (the value, what it
    wants): the quoting that gives text, `null` for an empty value, else a value of that kind."""
    from pipeline.tools.hydra_spelling import quoted

    value, wants = refused
    key, _, written = said.partition("=")
    fix = (
        f"quote it for text: -S {for_shell(f'{key}={quoted(written)}')}"
        if not isinstance(value, str | dict | list) and "valid string" in wants.lower()
        else "give a value of that kind"
    )
    if value == "" and _carried(text, before, [f"{key}=null" if o == said else o for o in run], where):
        fix = f"for none, give -S {key}=null"  # `key=` is the empty text to Hydra, not null
    return fix


def _model_errors(params: Any) -> dict[str, tuple[Any, str]]:
    """Where judgeloop's params model refuses `params`: dotted key -> (the value there, what it
    wants); none for a project whose params file is not judgeloop's (no model could be made)."""
    from pydantic import ValidationError

    from pipeline.experiments.params import params_model

    if not isinstance(params, dict):
        return {}
    try:
        params_model().model_validate(params)
    except ValidationError as exc:
        return {".".join(map(str, e["loc"])): (e.get("input"), e["msg"]) for e in exc.errors()}
    except JudgeloopError:
        return {}
    return {}


def _fix_for(text: str, run: list[str], why: str, override: str) -> str:
    """The -S that DVC takes in place of `override` (its key added with ++, or a + dropped where
    params.yaml has the key), tried on params.yaml; else by hand."""
    if "not in struct" in why or "Could not override" in why:
        other, said = "++" + override.lstrip("+"), "add a key params.yaml does not have with ++"
    elif "An item is already at" in why:
        other, said = override.lstrip("+"), "params.yaml has the key: change it without +"
    else:
        return BY_HAND
    if isinstance(landed(text, [other if o == override else o for o in run]), str):
        return BY_HAND
    return f"Fix: {said}: -S {for_shell(other)}"


def for_shell(argument: str) -> str:
    """`argument` as a POSIX shell gives it to the program: in double quotes where none of `"$`\\!`
    is in it (readable), else as shlex quotes it."""
    import shlex

    if argument == shlex.quote(argument):
        return argument
    return f'"{argument}"' if not set(argument) & set('"$`\\!') else shlex.quote(argument)


def _shown(value: Any) -> str:
    return "nothing" if value is MISSING else repr(value)


def _warn_relaid(text: str) -> None:
    """Say which lines of params.yaml DVC's rewrite changes beyond the values set (their values
    unchanged: checked above): what it writes for no -S at all, against the file."""
    from dvc.utils.hydra import apply_overrides

    with tempfile.TemporaryDirectory(prefix="judgeloop-set-") as folder:
        copy = Path(folder) / DVC_PARAMS
        copy.write_text(text, encoding="utf-8")
        apply_overrides(str(copy), [])
        rewritten = copy.read_text(encoding="utf-8")
    if rewritten == text:
        return
    lines = [
        line for line in difflib.ndiff(text.splitlines(), rewritten.splitlines()) if line[:2] in ("- ", "+ ")
    ]
    lines = lines or ["(only the line endings: DVC ends each line with \\n)"]  # a CRLF file
    shown = "\n".join(f"  {line}" for line in lines[:8]) + ("\n  ..." if len(lines) > 8 else "")
    from pipeline.llm.redact import redact

    click.echo(
        guarded(
            redact(
                "judgeloop exp: DVC's -S writes the whole of params.yaml again, in its own layout: beside "
                "the values set, these lines change (their values do not; a comment inside a list is lost):\n"
                f"{shown}\n"
                "To keep params.yaml as written, write it in that layout and commit it."
            )
        ),
        err=True,
    )
