"""`judgeloop exp --preset FILE`: the preset's values as DVC's `-S` overrides that put each into
params.yaml exactly as the preset gives it, or a refusal naming the preset, the key and the fix.

Each value is spelled in Hydra's grammar (pipeline.tools.hydra_spelling). The spelling is not the
only step a value takes: DVC writes params.yaml again with ruamel (YAML 1.2) and the stages read it
with PyYAML (YAML 1.1), so a text DVC writes plain (`no`, `on`, `1:30`) or a float it writes as
`1e-05` comes back otherwise, whatever the spelling. So before DVC is given them, the overrides are
applied by DVC's own function (dvc.utils.hydra.apply_overrides, what `dvc exp run -S` calls) to a
copy of params.yaml and read back as a stage reads it. Every preset value must come back equal in
type and value (1, 1.0 and true are three values; -0.0 is not 0.0; nan is nan) and every other
value of params.yaml unchanged (DVC rewrites the whole file: it resolves any `${...}` in it and
drops quotes YAML 1.2 does not need); else the preset is refused and nothing has run.

Why -S rather than params.yaml written before `dvc exp run`: -S is what DVC's experiments carry into
a queued run (`--queue`) or a temporary folder (`--temp`) without touching the workspace, and what
the experiment's commit records; writing the file here would need all of that redone, and still
meets DVC's rewrite of the file at any other -S in the same command.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import click

from pipeline.errors import JudgeloopError
from pipeline.tools.hydra_spelling import UnspellableValue, overrides

BY_HAND = "Fix: edit params.yaml by hand for this value (and commit it): DVC's -S cannot carry it"


def read_preset(path: Path) -> dict[Any, Any]:
    """The preset's mapping, read as judgeloop reads YAML (bounded; a key given twice, or a number
    YAML 1.1 and DVC's 1.2 read apart, refused with its line), or a click error naming the file."""
    import yaml

    from pipeline.llm.bounds import MAX_LINE_BYTES, check_yaml
    from pipeline.llm.files import read_regular
    from pipeline.llm.params_errors import duplicate_keys
    from pipeline.llm.project_files import link_out, yaml_problem
    from pipeline.llm.yaml_scalars import read_apart

    refused = link_out(path)
    if refused is not None:
        raise click.BadParameter(refused, param_hint="--preset")
    try:
        text = read_regular(path, MAX_LINE_BYTES).decode("utf-8")  # never a pipe or /dev/zero
        check_yaml(text)  # no alias bomb, no nesting past the composer's stack (pipeline.llm.bounds)
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        values = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise click.BadParameter(f"{path}: {yaml_problem(path, exc)}", param_hint="--preset") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise click.BadParameter(f"{path}: {exc}", param_hint="--preset") from exc
    if not isinstance(values, dict) or not values:
        raise click.BadParameter(f"{path}: write `section.key: value` lines", param_hint="--preset")
    for line, key, first in duplicate_keys(node)[:1]:
        raise click.BadParameter(
            f"{path}:{line}: '{key}' is given twice (first on line {first}); YAML would keep the last "
            "silently. Fix: keep one of them.",
            param_hint="--preset",
        )
    for line, written, one_one, one_two in read_apart(node)[:1]:
        raise click.BadParameter(
            f"{path}:{line}: {written} is {one_one} to judgeloop (YAML 1.1) but {one_two} to DVC (YAML "
            "1.2). Fix: write the number both read alike (without a leading 0, without ':'), or quote "
            "it if it is text.",
            param_hint="--preset",
        )
    return values


def preset_overrides(preset: Path, values: Mapping[Any, Any], params: Path) -> list[str]:
    """Every preset value's -S overrides, checked by DVC's own function on a copy of `params` (the
    file DVC's -S writes); a click error naming the preset, the key and the fix for a value that
    would not arrive exactly, or for any other value of params.yaml the overrides would change."""
    from pipeline.llm.settings import params_text

    text = params_text(params) if params.exists() else ""  # a link out, a pipe, not UTF-8: refused
    before = landed(text, [])
    if isinstance(before, str):
        raise click.ClickException(f"{params} as it is now: {before}. Fix params.yaml first.")
    each: dict[Any, list[str]] = {}
    for key, value in values.items():
        try:
            each[key] = overrides(key, value, present=_has(before, key))
        except UnspellableValue as exc:
            raise click.BadParameter(f"{preset}: {key}: {exc}.", param_hint="--preset") from None
    args = [override for key_overrides in each.values() for override in key_overrides]
    after = landed(text, args)
    if isinstance(after, str):  # the value DVC refuses alone is named; else they do so together
        named = [(k, why) for k, o in each.items() if isinstance(why := landed(text, o), str)]
        key, why = named[0] if named else ("its values together", after)
        raise click.BadParameter(f"{preset}: {key}: {why}. {BY_HAND}.", param_hint="--preset")
    difference = first_difference(with_values(before, values), after)
    if difference is not None:
        raise click.BadParameter(f"{preset}: {_said(values, *difference)}.", param_hint="--preset")
    return args


def _has(params: Any, key: Any) -> bool:
    """Whether params.yaml (as read) has the dotted `key` (a list's item by its index)."""
    node = params
    for part in key.split(".") if isinstance(key, str) else [None]:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif (
            isinstance(node, list)
            and part is not None
            and part.isascii()
            and part.isdigit()
            and int(part) < len(node)
        ):
            node = node[int(part)]
        else:
            return False
    return True


def _said(values: Mapping[Any, Any], where: str, meant: Any, got: Any) -> str:
    key = next((k for k in values if where == k or where.startswith(f"{k}.")), None)
    if key is None and isinstance(meant, str) and "${" in meant:
        # never printed: `${oc.env:NAME}`, or a `${key}` naming one, resolves to an environment's value
        return (
            f"DVC's -S writes the whole of params.yaml again, and would write what its {where} "
            f"{_shown(meant)} resolves to (an environment variable's value, say) into params.yaml and "
            f"the experiment's commit. Fix: give {where} its value in params.yaml itself, or move it "
            "out of params.yaml, and commit that"
        )
    if key is None:  # any -S would do the same: params.yaml itself holds what DVC rewrites otherwise
        return (
            f"DVC's -S writes the whole of params.yaml again, and its {where} would change from "
            f"{_shown(meant)} to {_shown(got)} (DVC resolves a ${{...}} and drops quotes YAML 1.2 does not "
            f"need). Fix: write {where} in params.yaml as DVC would leave it, or as both YAMLs read alike, "
            "and commit it"
        )
    return (
        f"{key}: {values[key]!r} would not reach params.yaml as given: a stage would read {_shown(got)} "
        f"at {where}. {BY_HAND}"
    )


def _shown(value: Any) -> str:
    return "nothing" if value is MISSING else repr(value)


def landed(params_text: str, args: list[str]) -> dict[str, Any] | str:
    """params.yaml (whose text is `params_text`) after DVC's apply_overrides(`args`) (none: as it
    is), as a stage reads it; or why DVC or the reader refuses it."""
    from dvc.utils.hydra import apply_overrides

    from pipeline.llm.settings import read_params_file

    with tempfile.TemporaryDirectory(prefix="judgeloop-preset-") as folder:
        copy = Path(folder) / "params.yaml"
        copy.write_text(params_text, encoding="utf-8")
        try:
            if args:
                apply_overrides(str(copy), args)
            return read_params_file(copy, environ={})
        except JudgeloopError as exc:  # the copy's folder left out of what is said
            said = str(exc).replace(str(copy), "params.yaml").split(" Fix: ")[0]
            return f"a stage would refuse params.yaml ({said})"
        except Exception as exc:  # whatever DVC, Hydra or OmegaConf raise: the value is not carried
            cause = exc.__cause__ or exc
            return f"DVC refuses it ({type(cause).__name__}: {cause})"


MISSING = object()


def with_values(params: dict[str, Any], values: Mapping[Any, Any]) -> dict[str, Any]:
    """params.yaml's mapping with each preset value set at its key (a mapping replaced, not merged;
    the sections on the way made where missing), as the overrides mean it: what must come back."""
    import copy

    meant = copy.deepcopy(params)
    for key, value in values.items():
        *path, last = key.split(".")
        node: Any = meant
        for part in path:
            if isinstance(node, list):  # an item of a list, by its index (DVC refused a bad one)
                node = node[int(part)]
                continue
            if not isinstance(node.get(part), dict | list):
                node[part] = {}
            node = node[part]
        if isinstance(node, list):
            node[int(last)] = copy.deepcopy(value)
        else:
            node[last] = copy.deepcopy(value)
    return meant


def first_difference(meant: Any, got: Any, where: str = "") -> tuple[str, Any, Any] | None:
    """Where `got` first differs from `meant`, in type or value, and the two there; or None."""
    if isinstance(meant, dict) and isinstance(got, dict):
        keys = [*meant, *(key for key in got if key not in meant)]
        return _first_in(((key, meant.get(key, MISSING), got.get(key, MISSING)) for key in keys), where)
    if isinstance(meant, list) and isinstance(got, list) and len(meant) == len(got):
        return _first_in(((index, *pair) for index, pair in enumerate(zip(meant, got, strict=True))), where)
    return None if _same_scalar(meant, got) else (where, meant, got)


def _first_in(parts: Iterable[tuple[Any, Any, Any]], where: str) -> tuple[str, Any, Any] | None:
    for key, one, other in parts:
        found = first_difference(one, other, f"{where}.{key}" if where else str(key))
        if found is not None:
            return found
    return None


def _same_scalar(meant: Any, got: Any) -> bool:
    """Equal in type and value: 1, 1.0 and true are three values; nan is nan; -0.0 is not 0.0."""
    if type(meant) is not type(got) or isinstance(meant, list | dict):
        return False
    if isinstance(meant, float) and (math.isnan(meant) or math.isnan(got)):
        return math.isnan(meant) and math.isnan(got)
    if isinstance(meant, float):
        return meant == got and math.copysign(1, meant) == math.copysign(1, got)
    return bool(meant == got)
