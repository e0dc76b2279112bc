"""The runs `judgeloop diff` reads, as folders: the workspace, a folder of someone else's run, or a
git revision / DVC experiment written out to a temporary folder (its params.yaml, outputs and
recordings, from git: every output is committed, cache: false).

A run's folder is untrusted input: its recordings are verified as they are read (a record whose
checksum fails stops the diff, naming the line), and every path its params name must stay inside it.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pipeline.data.recorded_calls import recorded_calls
from pipeline.errors import JudgeloopError
from pipeline.experiments.design import load_ref
from pipeline.experiments.judgements import Judgement, RunFiles
from pipeline.experiments.registry import designs
from pipeline.llm.records import RecordedCall

WORKSPACE = "workspace"
PARAMS = "params.yaml"
# What a run needs from a revision: its params, results and recordings (never data or code).
TRACKED = ("params.yaml", "outputs", "recordings")


@dataclass(frozen=True)
class Run:
    """One side of a diff: its name as given, its judgements, and its recorded calls by key."""

    name: str
    judgements: dict[tuple[str, str, int, str], Judgement]
    calls: dict[str, RecordedCall]


def _git(args: list[str], cwd: Path) -> bytes:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False)
    if done.returncode != 0:
        raise JudgeloopError(done.stderr.decode("utf-8", "replace").strip() or f"git {' '.join(args)} failed")
    return done.stdout


def resolve_revision(name: str, project: Path) -> str:
    """The commit a git revision or a DVC experiment's name stands for."""
    try:
        return _git(["rev-parse", "--verify", "--quiet", f"{name}^{{commit}}"], project).decode().strip()
    except JudgeloopError:
        pass
    try:
        from dvc.repo import Repo
        from dvc.repo.experiments.utils import resolve_name

        with Repo(str(project)) as repo:
            found = resolve_name(repo.scm, [name]).get(name)
            if found is not None:
                return str(repo.scm.get_ref(str(found)))
    except Exception as exc:  # noqa: BLE001 - DVC raises many kinds; the message below names the run
        raise JudgeloopError(f"no run named {name!r} ({exc}). Fix: a commit, branch or tag, "
                             "a name `dvc exp show` lists, `workspace`, or a run's folder.") from exc
    raise JudgeloopError(
        f"no run named {name!r}. Fix: a commit, branch or tag, a name `dvc exp show` lists, "
        "`workspace`, or a run's folder."
    )


def _extract(commit: str, project: Path, into: Path) -> None:
    listed = _git(["ls-tree", "--name-only", commit], project).decode().split("\n")
    wanted = [path for path in TRACKED if path in listed]
    if PARAMS not in wanted:
        raise JudgeloopError(f"revision {commit[:12]} has no params.yaml: not a run of this project")
    archive = _git(["archive", "--format=tar", commit, "--", *wanted], project)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")  # the data filter refuses links and paths leaving `into`


@contextmanager
def run_folder(name: str, project: Path) -> Iterator[Path]:
    """The folder holding run `name`: the project itself, a folder given by path, or a revision's
    files written out to a temporary folder (removed afterwards)."""
    if name == WORKSPACE:
        yield project
        return
    given = Path(name)
    if given.is_dir():
        if not (given / PARAMS).is_file():
            raise JudgeloopError(
                f"{given} holds no params.yaml. Fix: give the folder of a run (its params.yaml, "
                "outputs and recordings, as the project lays them out)."
            )
        yield given
        return
    commit = resolve_revision(name, project)
    with tempfile.TemporaryDirectory(prefix="judgeloop-diff-") as temporary:
        _extract(commit, project, Path(temporary))
        yield Path(temporary)


def read_run(name: str, project: Path, only: tuple[str, ...] = ()) -> Run:
    """Every judgement of run `name` (of the designs in `only`, or all), by pair key, and the calls
    recorded in its recordings folder(s)."""
    judgements: dict[tuple[str, str, int, str], Judgement] = {}
    read: dict[Path, dict[str, RecordedCall]] = {}
    with run_folder(name, project) as folder:
        for design in designs():
            if design.judgements is None or (only and design.name not in only):
                continue
            params = design.load_params(folder / PARAMS, environ={})
            where = RunFiles(folder, {}).path(params.cache.recordings)
            if where not in read:
                read[where] = recorded_calls(where)
            hook = load_ref(design.judgements)
            for judgement in hook(params, RunFiles(folder, read[where])):
                judgements[judgement.pair_key] = judgement
    calls = {key: call for by_key in read.values() for key, call in by_key.items()}
    return Run(name, judgements, calls)
