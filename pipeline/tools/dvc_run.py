"""`judgeloop repro` and `judgeloop exp`: DVC's own commands, run in judgeloop's environment.

    judgeloop repro                        dvc repro: every stage whose code, params or data changed
    judgeloop repro --replay rag_judge     re-execute stages from the recordings alone (no model)
    judgeloop exp -S refine.threshold=2    dvc exp run; if it fails, the workspace is put back

DVC runs every stage as `python -m stages DESIGN STAGE` with the `python` it finds first on the
PATH; in a fresh shell that is the system's, which lacks judgeloop's dependencies. These commands
put this interpreter's folder first, so `.venv/bin/judgeloop repro` (or `./judgeloop repro`) works
with nothing activated. DVC runs in this process, with its messages as they are, less one that
does not apply here ("Use `dvc push` ...": the recordings and outputs are tracked by git).

A failed experiment puts back what it changed (pipeline.tools.exp_snapshots). `dvc exp run` writes
the new values into params.yaml and runs the stages, and each stage that succeeds replaces its
outputs; when a later stage fails, DVC leaves params.yaml changed and those outputs new. `judgeloop
exp` copies params.yaml, dvc.lock and every stage's outputs aside before it starts and, if the run
fails or is interrupted, restores them (removing outputs that did not exist before), so the
workspace is the last good experiment again. The calls the failed run made stay in the local cache:
a rerun repeats none of them. A run killed outright (SIGKILL, OOM, power) cannot put anything back
and leaves its copy (.judgeloop/snapshots/exp-*), perhaps the only one of the last good outputs: it
is never removed for the user, but the next `judgeloop exp` names it with the commands that put it
back or drop it (`judgeloop exp restore NAME`, `judgeloop exp drop NAME`; a live run's copy, held
under an flock while it runs, is told apart).
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import click

from pipeline.tools.exp_snapshots import (
    ALWAYS_KEPT,
    Snapshot,
    drop_snapshot,
    name_killed_runs_snapshots,
    outputs_or_none,
    restore_snapshot,
    stage_outputs,
)
from pipeline.tools.local_state import refuse_committed_link

PUSH_HINT = "Use `dvc push` to send your updates to remote storage."
PASS_THROUGH = {"ignore_unknown_options": True, "allow_interspersed_args": False}


def environment_first() -> None:
    """This interpreter's folder first on the PATH, for the `python` of every stage DVC runs."""
    here = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    if path.split(os.pathsep)[:1] != [here]:
        os.environ["PATH"] = os.pathsep.join([here, path]) if path else here


@contextmanager
def _without_push_hint() -> Iterator[None]:
    from dvc.ui import ui

    write = ui.write

    def filtered(*objects: object, **kwargs: object) -> None:
        if objects != (PUSH_HINT,):
            write(*objects, **kwargs)

    ui.write = filtered
    try:
        yield
    finally:
        ui.write = write


@contextmanager
def dvc_started() -> Iterator[None]:
    """This interpreter's folder first on the PATH, and the warm process for DVC's stage commands
    (pipeline/tools/warm_stages.py) started, for the time of the `with`: repro and exp enter it
    before their own work, so that the warm process's imports (a third of a second of CPU) run
    beside that work rather than beside DVC's start. Set the environment the stages see first:
    the warm process runs a stage only in the environment it was started in."""
    environment_first()
    from pipeline.tools.warm_stages import warm_stages

    with warm_stages():
        yield


def run_dvc(args: Sequence[str]) -> int:
    """`dvc ARGS` in this process, with the environment first on the PATH; its exit status. Its
    `python -m stages ...` commands run warm where they can (pipeline/tools/warm_stages.py)."""
    with dvc_started():  # (the one a caller started, if it did: its imports run while DVC's do)
        return _run_dvc(args)


def _run_dvc(args: Sequence[str]) -> int:
    with _dvc_in_process():
        return _dvc_main(args)


@contextmanager
def _dvc_in_process() -> Iterator[None]:
    """What DVC runs in this process under: its push hint left out, dvc.yaml and dvc.lock remembered
    as read and written (pipeline.tools.dvc_lockfile), the cyclic GC run less often, the run-cache
    look-up of a stage with persist outputs refused before it hashes the stage's dependencies
    (pipeline.tools.dvc_run_cache)."""
    from pipeline.tools.dvc_lockfile import remembered_yaml
    from pipeline.tools.dvc_run_cache import outputs_first

    with _without_push_hint(), remembered_yaml(), _fewer_collections(), outputs_first():
        yield


def _dvc_main(args: Sequence[str]) -> int:
    from dvc.cli import main as dvc_main

    status: int = dvc_main(list(args))
    return status


@contextmanager
def _fewer_collections(first_threshold: int = 20_000) -> Iterator[None]:
    """The cyclic garbage collector run less often while DVC runs in this process: what is imported
    so far frozen (never scanned again), and the youngest generation collected at 20,000 new
    objects rather than 700. DVC builds many objects per stage (its outputs, dependencies, locks)
    and, at the default, collected about 1,300 times in a 16-stage `make replay`, 0.57 of the
    process's 3.2 s of CPU (0.36 s at 20,000; bench/README.md, issue 31). Garbage is still
    collected, and memory stays near the default's; the settings are put back after."""
    before = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(first_threshold, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


def run_experiment(args: Sequence[str], root: Path = Path(".")) -> int:
    """`dvc exp run ARGS`; on failure (or an interrupt) the workspace is put back as it was."""
    name_killed_runs_snapshots(root)
    before = {Path(p) for p in ALWAYS_KEPT} | stage_outputs(root)
    snapshot = Snapshot(root, before)
    status = 1
    try:
        status = run_dvc(["exp", "run", *args])
    finally:
        if status == 0:
            snapshot.discard()
        else:
            snapshot.restore(outputs_or_none(root))
            snapshot.discard()
            click.echo(
                "judgeloop exp: the experiment failed; params.yaml, dvc.lock and every stage's outputs "
                "are back as they were before it. The calls it made are in the local cache, so a rerun "
                "repeats none of them.",
                err=True,
            )
    return status


DESIGN_OPTION = click.option(
    "--design", metavar="NAME", help="Only this design's stages (DVC runs what they need, no other design's)."
)


@click.command(context_settings=PASS_THROUGH)
@click.option(
    "--replay", is_flag=True, help="From the recordings alone: JUDGELOOP_CACHE_MODE=replay, --force."
)
@DESIGN_OPTION
@click.argument("dvc_args", nargs=-1, type=click.UNPROCESSED, metavar="[STAGE|DESIGN]... [DVC REPRO OPTIONS]")
def repro(replay: bool, design: str | None, dvc_args: tuple[str, ...]) -> None:
    """Run the pipeline: `dvc repro`, with judgeloop's environment first on the PATH.

    Only the stages whose code, params or data changed run, and every call made before is a cache
    hit. Each stage prints what it expects and what it did; on a terminal a bar follows its calls.

    \b
    Examples:
      judgeloop repro                       every design's stages that are out of date
      judgeloop repro rag_aggregate         one design's chain (and what it needs)
      judgeloop repro --design paper        one design's stages (`judgeloop repro paper` too)
      judgeloop repro --replay              every stage again from the recordings: byte-identical
      judgeloop repro --replay --design rag one design's stages from the recordings
    """
    refuse_committed_link(Path("."))
    if replay:
        os.environ["JUDGELOOP_CACHE_MODE"] = "replay"
    with dvc_started():  # before the designs are read and the servers tried: see dvc_started
        from pipeline.tools.design_targets import expand_designs

        dvc_args = tuple(expand_designs(dvc_args, design))
        targets = [a for a in dvc_args if not a.startswith("-")]
        if not replay:
            from pipeline.tools.preflight import check_servers

            check_servers(targets)
        status = _repro_and_refresh(["--force"] if replay else [], dvc_args, targets)
    _closed()
    sys.exit(status)


def _repro_and_refresh(force: list[str], dvc_args: Sequence[str], targets: list[str]) -> int:
    """`dvc repro` and, after a run of some stages (`targets`: the index stage, last of all, did not
    run), the index written again: with no DVC option but --force, knowing the targets' stages up to
    date (refresh_index). In the run's environment, so that DVC's index is built again from the
    dvc.yaml and dvc.lock the run read (pipeline.tools.dvc_lockfile), not parsed again where the
    text is the same (issue 31)."""
    with _dvc_in_process():
        status = _dvc_main(["repro", *force, *dvc_args])
        if status == 0 and targets:
            refresh_index(ran=targets if len(targets) == len(dvc_args) else ())
    return status


def refresh_index(root: Path = Path("."), ran: Sequence[str] = ()) -> None:
    """outputs/index.html written again after a run of some stages, naming every design whose stages
    DVC finds out of date, with the command that brings it up to date. `ran`: the targets of the
    `dvc repro` (with no option but --force) that has just succeeded, whose stages it has brought up
    to date (DVC is not asked about them again: pipeline.tools.index_refresh)."""
    from pipeline.tools.index_refresh import stale_designs
    from pipeline.tools.report_index import write_index

    stale = stale_designs(root, ran)
    written = write_index(stale=stale)
    said = f"; out of date: {', '.join(f'{name} (`{cmd}`)' for name, cmd in stale.items())}" if stale else ""
    click.echo(f"index: wrote {written}{said}", err=True)


def preset_args(path: Path, params: Path = Path("params.yaml")) -> list[str]:
    """A preset file's `section.key: value` lines as DVC's `-S ++section.key=value` arguments, each
    value spelled so that it reaches `params` (the file DVC's -S writes) as the preset gives it, or
    refused naming the preset, the key and the fix (pipeline.tools.preset_values)."""
    from pipeline.tools.preset_values import preset_overrides, read_preset

    overrides = preset_overrides(path, read_preset(path), params)
    return [part for override in overrides for part in ("-S", override)]


def _exp_list(args: Sequence[str]) -> None:
    from pipeline.tools.exp_list import render_list

    extra = set(args) - {"--all-commits"}
    if extra:
        raise click.UsageError(f"exp list takes only --all-commits (got {' '.join(sorted(extra))})")
    click.echo(render_list("--all-commits" in args), nl=False)


def _one_snapshot(command: str, args: Sequence[str]) -> str:
    if len(args) != 1:
        raise click.UsageError(
            f"exp {command} takes one snapshot's name (exp-…, as `judgeloop exp` named it)"
        )
    return args[0]


# `judgeloop exp WORD ...` that is no experiment (a stage of that name cannot be run by it)
SUBCOMMANDS: dict[str, Callable[[Sequence[str]], None]] = {
    "list": _exp_list,
    "restore": lambda args: restore_snapshot(Path("."), _one_snapshot("restore", args)),
    "drop": lambda args: drop_snapshot(Path("."), _one_snapshot("drop", args)),
}


@click.command(context_settings=PASS_THROUGH)
@DESIGN_OPTION
@click.option(
    "--preset",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A file of `section.key: value` lines, each put into params.yaml exactly as written, through -S "
    "(a value DVC's -S cannot carry is refused, naming it; presets/real-model.yaml).",
)
@click.argument("dvc_args", nargs=-1, type=click.UNPROCESSED, metavar="[DVC EXP RUN ARGS]...")
def exp(design: str | None, preset: Path | None, dvc_args: tuple[str, ...]) -> None:
    """Run an experiment: `dvc exp run`, and if it fails, put the workspace back as it was.

    `-S section.key=value` changes one value of params.yaml (one line of the file), DVC runs the
    stages that depend on it and records the experiment (it needs a git identity). If a stage
    fails, params.yaml, dvc.lock and every stage's outputs are restored. The value is read as DVC
    reads it (Hydra's grammar: 2 is a number, '2' text); one that would reach the stages as
    something else, or that holds a ${...}, is refused before anything runs, with its fix.

    \b
    Examples:
      judgeloop exp -S refine.threshold=2
      judgeloop exp rag_aggregate -S rag.prompt_mode=ids
      judgeloop exp -S llm.backend=ollama -S llm.model=gemma3:27b
      judgeloop exp list                   this commit's experiments: params changed, numbers moved
      judgeloop exp restore exp-abcd1234   a killed run's copy of the last good outputs put back
      judgeloop exp drop exp-abcd1234      a killed run's copy removed
      judgeloop exp --design paper -S llm_overrides.paper.model=gemma3:27b   one design, its own model
      judgeloop exp --preset presets/real-model.yaml -S llm.backend=ollama -S llm.model=gemma3:27b
    Then: `judgeloop compare` (this run against the last commit); `dvc exp apply NAME` or
    `git checkout -- params.yaml dvc.lock outputs recordings` to go back.
    """
    from pipeline.experiments.params import require_params_file
    from pipeline.tools.set_params import check_set_params, set_params

    require_params_file()
    refuse_committed_link(Path("."))
    if dvc_args[:1] and dvc_args[0] in SUBCOMMANDS:
        SUBCOMMANDS[dvc_args[0]](dvc_args[1:])
        return
    from pipeline.tools.design_targets import expand_designs
    from pipeline.tools.set_values import check_set_values, refuse_held_interpolation

    if preset is not None:  # before the preset is tried on a copy: DVC's error there quotes a secret
        refuse_held_interpolation(Path("params.yaml"), f"--preset {preset}")
    presets = preset_args(preset) if preset is not None else []
    check_set_params((*presets, *dvc_args))
    check_set_values(set_params(dvc_args), set_params(presets))  # the user's own -S, as DVC reads them
    dvc_args = (*presets, *dvc_args)
    with dvc_started():  # before the outputs are copied aside: see dvc_started
        status = run_experiment(expand_designs(dvc_args, design))
    _closed()
    sys.exit(status)


def _closed() -> None:
    """DVC has run and closed its repository, the warm process is stopped and every file written is
    closed: the program may leave without the interpreter's teardown (pipeline.tools.program_exit)."""
    from pipeline.tools.program_exit import allow

    allow()
