"""`judgeloop variant DIR`: the workspace's experiment with some params changed, recorded into a
folder of its own: a second run to set against the first (`judgeloop diff workspace DIR`), which
can be committed, since a diff reads only its params.yaml, outputs and recordings.

    judgeloop variant runs/paper-sampled --design paper --from judge \\
        -S judge.samples=3 -S llm.options.temperature=0.7

DIR gets params.yaml (the workspace's, the -S values set, the data it reads named relative to it),
the outputs and recordings of the stages before --from (copied: the variant judges what the first
run judged), and the design's model-calling stages from --from on, run there as dvc.yaml runs them
(`python -m stages DESIGN STAGE`, each recorded in DIR/recordings/<stage>/). Run again with
--replay, it serves every call from those recordings and writes the same bytes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import yaml

from pipeline.errors import ConfigError, JudgeloopError
from pipeline.experiments.design import PARAM_REFERENCE, Design, Stage, resolve
from pipeline.experiments.params import require_params_file
from pipeline.experiments.registry import DEFAULT as DEFAULT_DESIGN
from pipeline.experiments.registry import load_design
from pipeline.experiments.steps import LLMStep
from pipeline.llm.bounds import check_yaml
from pipeline.llm.files import atomic_write
from pipeline.llm.project_files import yaml_problem
from pipeline.llm.settings import params_text
from pipeline.llm.terminal import shown
from pipeline.llm.yaml_scalars import read_apart

PROJECT = Path(__file__).resolve().parents[2]


def set_value(params: dict[str, Any], dotted: str, text: str) -> None:
    """A -S `dotted=text`, its text read as YAML (as params.yaml's reader would read it there)."""
    place(params, dotted, _read_value(dotted, text))


def place(params: dict[str, Any], dotted: str, value: Any) -> None:
    *sections, name = dotted.split(".")
    where = params
    for section in sections:
        found = where.setdefault(section, {})
        if not isinstance(found, dict):
            raise click.BadParameter(f"{dotted}: {section} is not a section", param_hint="-S")
        where = found
    where[name] = value


def _read_value(dotted: str, text: str) -> Any:
    """A -S value as params.yaml's reader would read it there: guarded by check_yaml (a scalar PyYAML
    cannot make, `2026-02-30`, was a ValueError's traceback), and refused where YAML 1.1 and DVC's 1.2
    read its number apart (`010`: 8 here, 10 to DVC; pipeline.llm.yaml_scalars)."""
    setting = shown(f"{dotted}={text}", one_line=True)
    try:
        check_yaml(text)
        node, value = yaml.compose(text, Loader=yaml.SafeLoader), yaml.safe_load(text)
    except yaml.YAMLError as exc:
        problem = shown(str(getattr(exc, "problem", None) or exc), one_line=True)
        fix = "" if "Fix:" in problem else " Fix: quote it if it is text (-S 'key=\"...\"')."
        raise click.BadParameter(f"{setting}: not a YAML value ({problem}).{fix}", param_hint="-S") from None
    if apart := read_apart(node):
        _, _, ours, dvcs = apart[0]
        raise click.BadParameter(
            f"{setting}: {ours} to judgeloop (YAML 1.1) but {dvcs} to DVC (YAML 1.2). Fix: write the "
            "number both read alike (without a leading 0, without ':'), or quote it if it is text.",
            param_hint="-S",
        )
    return value


def _outs(design: Design[Any], params: Any) -> set[Path]:
    return {resolve(out, params) for stage in design.stages for out in stage.outs}


def _data_references(design: Design[Any], params: Any) -> dict[str, Path]:
    """The params values that name data a stage reads (a ${section.key} dependency that is no
    stage's output): dotted key -> the path they name."""
    outs = _outs(design, params)
    found: dict[str, Path] = {}
    for stage in design.stages:
        for dep in stage.deps:
            match = PARAM_REFERENCE.fullmatch(dep)
            if match and resolve(dep, params) not in outs:
                found[match.group(1)] = resolve(dep, params)
    return found


def _is_llm(stage: Stage) -> bool:
    return isinstance(stage.load(), LLMStep)


def _copy(source: Path, target: Path) -> None:
    """`source` copied to `target`, replacing what stood there: a file copied over where it stands
    would be written through a link at its name (symbolic or hard, in a DIR someone else committed),
    changing a file outside DIR."""
    if not (source.is_dir() or source.is_file()):
        raise JudgeloopError(f"{source} does not exist: run the first run's stages first (dvc repro)")
    one, other = os.path.realpath(source), os.path.realpath(target)
    if os.path.commonpath([one, other]) in (one, other):  # the same, or one inside the other
        raise JudgeloopError(
            f"{target}: is {source}, or holds it or lies in it (an absolute out path, or FOLDER inside "
            "the project's outputs), so copying would replace what it copies. Fix: give a FOLDER of its "
            "own, outside the outputs, and outs relative to the project."
        )
    _remove(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target)
    else:
        shutil.copy2(source, target)


def _remove(target: Path) -> None:
    """What stands at `target` removed, a link as a link (never what it leads to)."""
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        target.unlink()
    elif target.is_dir():
        shutil.rmtree(target)


def write_variant_params(folder: Path, design: Design[Any], settings: tuple[str, ...]) -> Any:
    path = require_params_file()
    try:
        text = params_text(path)  # one descriptor, a regular file, bounded: never a pipe put there
        check_yaml(text)  # no alias bomb, no nesting past the composer's stack (pipeline.llm.bounds)
        raw = yaml.safe_load(text)
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(
            f"{path}: not valid YAML ({yaml_problem(path, exc)}). Fix the syntax there."
        ) from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: not the mapping of sections params.yaml is. Fix: restore it.")
    for setting in settings:
        key, sep, value = setting.partition("=")
        if not sep:
            raise click.BadParameter(f"{setting!r}: write key=value", param_hint="-S")
        set_value(raw, key, value)
    current = design.load_params()
    for dotted, path in _data_references(design, current).items():
        place(raw, dotted, os.path.relpath(path.resolve(), folder.resolve()))  # a path, not YAML
    # Replaced in one step, never written through a link at its name (pipeline.llm.hard_links).
    atomic_write(folder / "params.yaml", yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))
    return current


def run_stages(folder: Path, design: Design[Any], stages: list[Stage], replay: bool) -> None:
    env = {k: v for k, v in os.environ.items() if k != "JUDGELOOP_PARAMS"}
    env["PYTHONPATH"] = os.pathsep.join([str(PROJECT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if replay:
        env["JUDGELOOP_CACHE_MODE"] = "replay"
    for stage in stages:
        done = subprocess.run(
            [sys.executable, "-m", "stages", design.name, stage.name], cwd=folder, env=env, check=False
        )
        if done.returncode != 0:
            raise JudgeloopError(f"stage {stage.name} failed in {folder} (its messages are above)")


@click.command()
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@click.option("--design", "design_name", default=DEFAULT_DESIGN, show_default=True, help="The design to run.")
@click.option(
    "--from", "first", required=True, help="The first stage to run again (the ones before are copied)."
)
@click.option("-S", "--set", "settings", multiple=True, help="A params value, key=value (repeatable).")
@click.option("--replay", is_flag=True, help="Serve every call from FOLDER's recordings (no model).")
def variant(folder: Path, design_name: str, first: str, settings: tuple[str, ...], replay: bool) -> None:
    """The workspace's experiment with some params changed, recorded into FOLDER: a second run
    for `judgeloop diff workspace FOLDER`."""
    design = load_design(design_name)
    names = [s.name for s in design.stages]
    if first not in names:
        raise click.BadParameter(
            f"design {design.name} has no stage {first!r} ({', '.join(names)})", param_hint="--from"
        )
    folder.mkdir(parents=True, exist_ok=True)
    current = write_variant_params(folder, design, settings)
    before = design.stages[: names.index(first)]
    recordings_dir = Path(current.cache.recordings)
    for stage in before:
        for out in stage.outs:
            _copy(resolve(out, current), folder / resolve(out, current))
        if _is_llm(stage):
            _copy(recordings_dir / stage.name, folder / recordings_dir / stage.name)
    again = [s for s in design.stages[names.index(first) :] if _is_llm(s)]
    run_stages(folder, design, again, replay)
    click.echo(
        f"recorded {', '.join(s.name for s in again)} into {folder}: judgeloop diff workspace {folder}"
    )
