"""`judgeloop check`: does this clone reproduce? Answered in seconds, in one process, with no model.

    judgeloop check              every stage of every design, then the report index
    judgeloop check rag          the RAG design's stages only

`judgeloop repro --replay` proves the pipeline as DVC runs it, a process and DVC's hashing per stage.
This asks the same question faster: every stage that dvc.lock locks is run in this process, in
its design's order (the report index last), in cache mode replay, in a throw-away copy of the
project (params.yaml, dvc.lock, recordings/ and the data the stages read, copied to a temporary
folder; a local cache of its own there), so the workspace, its outputs and your local cache are
not touched. Every call is served from the recordings alone, verified as a replay verifies it (each
recording against its pin in dvc.lock, each record against its key and checksum); a call that is
not recorded fails the stage.

For each stage it then compares, out by out, with dvc.lock: the out the replay wrote (so the code
and the recordings reproduce the locked results) and the out in the workspace (so the committed
files are the locked ones), hashed as DVC hashes them (md5 of a file, DVC's `.dir` md5 of a folder).
One line per stage; at the first difference it says what differs and exits with status 1 (the
stages after it are not run), so CI fails on a tampered output, recording or dvc.lock.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import click

from pipeline.errors import JudgeloopError
from pipeline.llm.bounds import MAX_LINE_BYTES, check_yaml
from pipeline.llm.files import link_leading_out, read_regular
from pipeline.llm.project_files import link_out, refuse_link_out, yaml_problem
from pipeline.llm.recordings.dvc_links import copy_cache_links_as_files
from pipeline.llm.recordings.pins import LOCK_FILE, dir_md5
from pipeline.llm.terminal import echo, shown
from pipeline.tools.local_state import say_committed

INDEX_STAGE = "report_index"  # dvc.yaml's last stage, `python -m stages.index`
CODE = ("pipeline/", "stages/")  # deps that are code: the check runs this process's own


@dataclass(frozen=True)
class LockedOut:
    path: str
    md5: str


@dataclass(frozen=True)
class LockedStage:
    name: str
    outs: tuple[LockedOut, ...]
    deps: tuple[str, ...]


def read_lock(root: Path) -> dict[str, LockedStage]:
    """dvc.lock's stages: each out with its md5, and each dep's path."""
    import yaml

    lock = root / LOCK_FILE
    if not lock.is_file():
        raise click.ClickException(f"no {LOCK_FILE} in {root.resolve()}: run in the project's folder.")
    refused = link_out(lock)  # never another file of this machine read (or quoted) as the lock
    if refused is not None:
        raise click.ClickException(refused)
    try:
        text = read_regular(lock, MAX_LINE_BYTES).decode("utf-8")  # never a pipe or /dev/zero put there
        check_yaml(text)  # no alias bomb, no nesting past the composer's stack (pipeline.llm.bounds)
        # libyaml's safe loader where built (the same data, some ten times faster on the 4,000-line lock)
        data: Any = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, yaml.YAMLError, UnicodeDecodeError) as exc:
        problem = yaml_problem(lock, exc)
        raise click.ClickException(
            f"{lock}: not readable ({problem}). Fix: git checkout -- {LOCK_FILE}"
        ) from exc
    stages = data.get("stages") if isinstance(data, dict) else None
    if not isinstance(stages, dict):
        raise click.ClickException(f"{lock}: no stages. Fix: git checkout -- {LOCK_FILE}")
    locked = {str(name): _locked_stage(str(name), stage) for name, stage in stages.items()}
    for stage in locked.values():
        for out in stage.outs:
            if not _inside_the_project(out.path):
                raise click.ClickException(
                    f"{lock}: stage {stage.name!r} names the out {out.path!r}, which is not a path inside "
                    f"the project, so its hash is not read. Fix: git checkout -- {LOCK_FILE}"
                )
    return locked


def _inside_the_project(path: str) -> bool:
    """A relative path that stays in the folder it is read from (its out is hashed there): not
    absolute, no '..', no NUL (which no file name holds)."""
    parts = PurePosixPath(path).parts
    return bool(parts) and not PurePosixPath(path).is_absolute() and ".." not in parts and "\0" not in path


def _entries(stage: Any, kind: str) -> list[dict[str, Any]]:
    found = stage.get(kind) if isinstance(stage, dict) else None
    return [e for e in found or [] if isinstance(e, dict) and isinstance(e.get("path"), str)]


def _locked_stage(name: str, stage: Any) -> LockedStage:
    outs = tuple(LockedOut(o["path"], str(o.get("md5"))) for o in _entries(stage, "outs"))
    return LockedStage(name, outs, tuple(d["path"] for d in _entries(stage, "deps")))


def md5_of(path: Path) -> str | None:
    """DVC's hash of an out: md5 of a file's bytes, `<md5>.dir` of a folder; None if absent."""
    if path.is_symlink():
        return f"a link to {os.readlink(path)}"
    if path.is_dir():
        return dir_md5(path)
    if path.is_file():
        with path.open("rb") as stream:  # a chunk at a time: refinement.jsonl is 3.2 GB at 1M calls
            return hashlib.file_digest(stream, "md5").hexdigest()
    return None


def differences(stage: LockedStage, root: Path, label: str) -> list[str]:
    """Each out under `root` whose hash is not dvc.lock's, said in a line."""
    said = []
    for out in stage.outs:
        # a folder link on the way (a pull request's `outputs/x` -> `/`) is never followed: whatever
        # it leads to would be read whole, and its hash printed
        leading_out = link_leading_out(str(root), out.path)
        if leading_out is not None:
            link = shown(os.path.relpath(leading_out, root), one_line=True)
            found: str | None = f"a link leading out of the project ({link})"
        else:
            found = md5_of(root / out.path)
        if found != out.md5:
            # The path is dvc.lock's (a pull request's): on one line, every control shown as its escape.
            path = shown(out.path, one_line=True)
            said.append(f"{path} ({label}): locked {out.md5}, found {found or 'nothing'}")
    return said


def _copy(source: Path, target: Path) -> None:
    if not source.exists() or target.exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target, symlinks=True)
    else:
        shutil.copy2(source, target, follow_symlinks=False)


def inputs(locked: dict[str, LockedStage]) -> set[str]:
    """What the stages read that no stage writes and is not code: the data (relative paths only;
    data outside the project is read where it is)."""
    written = {out.path for stage in locked.values() for out in stage.outs}
    return {
        dep
        for stage in locked.values()
        for dep in stage.deps
        if dep not in written and not dep.startswith(CODE) and not Path(dep).is_absolute()
    }


def workspace(params: Path, into: Path, locked: dict[str, LockedStage], recordings: str) -> None:
    """The copy the check runs in: params.yaml, dvc.lock, the recordings and the stages' data (a
    path that leads out of the project is not copied: the stage that reads it says it is missing)."""
    _copy(params, into / "params.yaml")
    for name in (LOCK_FILE, recordings, *sorted(inputs(locked))):
        if ".." not in Path(name).parts:
            _copy(Path(name), into / name)
    if ".." not in Path(recordings).parts and (into / recordings).is_dir():
        # A recording DVC checked out as a link into its cache is read as a file in the project; the
        # copy is in no DVC project, so it gets the file. Only the recordings': a data folder's links
        # stay links, read (or refused) there as here, never copied whole (a dataset DVC tracks).
        copy_cache_links_as_files(Path(recordings), into / recordings)


@contextlib.contextmanager
def inside(folder: Path, environ: dict[str, str]) -> Iterator[None]:
    """The working folder and these variables set while the block runs, then put back."""
    before = {name: os.environ.get(name) for name in environ}
    here = Path.cwd()
    os.environ.update(environ)
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(here)
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@dataclass(frozen=True)
class Planned:
    design: str  # "" for the report index
    stage: str


def plan(names: tuple[str, ...], locked: dict[str, LockedStage]) -> list[Planned]:
    """The locked stages of the designs named (default: every design, then the report index)."""
    from pipeline.experiments.registry import design_names, load_design

    chosen = list(names) or design_names()
    planned = [
        Planned(design, stage.name)
        for design in chosen
        for stage in load_design(design).stages
        if stage.name in locked
    ]
    if not names and INDEX_STAGE in locked:
        planned.append(Planned("", INDEX_STAGE))
    return planned


def run_one(step: Planned) -> None:
    """One stage as `python -m stages DESIGN STAGE` runs it, its calls replayed (the environment
    says replay), without its progress lines' dry run."""
    if not step.design:
        from pipeline.tools.report_index import write_index

        write_index()
        return
    from pipeline.experiments.steps import LLMStep
    from pipeline.llm.stage import recorded_session
    from stages.runner import FileUpstream, load

    design, stage, run = load(step.design, step.stage)
    params = design.load_params()
    if not isinstance(run, LLMStep):
        run(params)
        return
    inputs_ = run.inputs(params, FileUpstream(design, params))
    with recorded_session(params, stage.name) as session:
        # Written as they come, as the stage runner writes them (never held whole: refine's results
        # are 3.2 GB of JSON at 1M calls); into the throw-away copy, so a miss raised after leaves
        # nothing behind in the workspace.
        run.output.write(design.results_path(stage.name, params), run.stream(params, session, inputs_))
        session.raise_for_misses()


def check_stage(step: Planned, stage: LockedStage, root: Path, copy: Path) -> list[str]:
    """What differs for one stage: its committed outs, then the replay of it (or why it failed)."""
    committed = differences(stage, root, "in the workspace")
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(said):
            run_one(step)
    except (JudgeloopError, click.ClickException) as exc:
        return [*committed, f"the replay failed: {exc.message}"]
    except OSError as exc:  # a file the stage reads is missing or unreadable
        return [*committed, f"the replay failed: {exc}"]
    return committed + differences(stage, copy, "replayed")


def run_check(names: tuple[str, ...]) -> int:
    """Check each planned stage of the project in the working folder: 0 if all reproduce, else 1
    (it stops at the first that differs)."""
    from pipeline.experiments.params import require_params_file
    from pipeline.llm.settings import EngineSettings, load_settings

    root = Path.cwd()
    params = require_params_file()
    refuse_link_out(params)  # resolved, a link out would be read (and copied) as a file of its own folder
    params = params.resolve()
    recordings = load_settings(EngineSettings, params, only_its_sections=True).cache.recordings
    locked = read_lock(root)
    steps = plan(names, locked)
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="judgeloop-check-") as tmp:
        copy = Path(tmp)
        workspace(params, copy, locked, str(recordings))
        environ = {
            "JUDGELOOP_CACHE_MODE": "replay",
            "JUDGELOOP_CACHE_DIR": str(copy / ".judgeloop" / "cache"),
            "JUDGELOOP_PARAMS": str(copy / "params.yaml"),
        }
        with inside(copy, environ):
            for step in steps:
                started = time.monotonic()
                problems = check_stage(step, locked[step.stage], root, copy)
                took = time.monotonic() - started
                if problems:
                    click.echo(f"DIFFERS {step.stage} ({took:.2f} s):", err=True)
                    for problem in problems:
                        echo(f"  {problem}", err=True)  # a replay's error may quote a file: escaped
                    return 1
                outs = len(locked[step.stage].outs)
                click.echo(f"ok  {step.stage}: {outs} outs as locked, replayed in {took:.2f} s")
    click.echo(f"every stage reproduces dvc.lock ({len(steps)} stages, {time.monotonic() - began:.1f} s)")
    return 0


@click.command()
@click.argument("names", metavar="[DESIGN]...", nargs=-1)
def check(names: tuple[str, ...]) -> None:
    """Does this clone reproduce? Every stage replayed from the recordings, in one process.

    Each stage that dvc.lock locks runs in a throw-away copy of the project, in cache mode replay
    (no model; every call from the recordings, verified), and each of its outs, the replayed one
    and the committed one, is compared with dvc.lock's md5. One line per stage; at the first
    difference it names the out and both hashes, or why the replay failed, and exits with status 1.

    \b
    Examples:
      judgeloop check            every design, and the report index
      judgeloop check rag        the RAG judge's stages only
    """
    say_committed(Path.cwd())
    try:
        status = run_check(names)
    except JudgeloopError as exc:
        raise click.ClickException(exc.message) from exc
    sys.exit(status)
