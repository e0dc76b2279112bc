"""The runs `judgeloop diff` reads, as folders: the workspace, a folder of someone else's run, or a
git revision / DVC experiment written out to a temporary folder (its params.yaml, outputs and
recordings, from git: every output is committed, cache: false).

A run's folder is untrusted input: every recorded call the diff uses is verified before its use (a
record whose key or checksum fails stops the diff, naming its line), and every path its params
name must stay inside the folder. Only the calls used are verified, the changed judgements' (at the
paper's scale, a fifth of the calls): hashing every record of both runs was most of the diff's time.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
import tempfile
from collections import ChainMap
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import orjson
from pydantic import ValidationError

from pipeline.errors import JudgeloopError
from pipeline.experiments.design import load_ref
from pipeline.experiments.judgements import Judgement, RunFiles
from pipeline.experiments.registry import designs
from pipeline.llm.keys import KEY_RECIPE
from pipeline.llm.recordings import line_checks, stage_folders, stage_reader
from pipeline.llm.records import RecordedCall
from pipeline.llm.types import CallContext

WORKSPACE = "workspace"
PARAMS = "params.yaml"
# What a run needs from a revision: its params, results and recordings (never data or code).
TRACKED = ("params.yaml", "outputs", "recordings")


class VerifiedCalls(Mapping[str, RecordedCall]):
    """A recordings folder's calls by key (each key's first copy, by stage then line, as a replay
    serves it), each parsed and verified the first time it is looked up: a line is read for its key
    (and its context, where a design selects calls by it) until then."""

    def __init__(self, folder: Path) -> None:
        self._found: dict[str, tuple[str, dict[str, Any], Mapping[str, str], str]] = {}
        self._verified: dict[str, RecordedCall] = {}
        for stage in stage_folders.stage_dirs(folder):
            parts = stage_reader.split_recording(stage)
            if parts.problems:
                raise JudgeloopError(
                    f"{parts.problems[0]}. Fix: restore the file from git, or re-record the stage."
                )
            for number, line in parts.calls:
                where = parts.where(number)
                try:
                    raw = orjson.loads(line)
                    key, context = raw["key"], raw["context"]
                except (ValueError, KeyError, TypeError) as exc:
                    raise JudgeloopError(
                        f"{where}: not a recorded call ({exc}). Fix: restore it from git."
                    ) from exc
                if raw.get("recipe", KEY_RECIPE) != KEY_RECIPE:  # written under an older key recipe
                    key = self._verify(line, parts.blobs, where).record.key
                self._found.setdefault(str(key), (line, context, parts.blobs, where))

    @staticmethod
    def _verify(line: str, blobs: Mapping[str, str], where: str) -> RecordedCall:
        call = line_checks.parse_call_line(line, blobs, where)
        problem = call.record.problem()
        if problem is not None:
            raise JudgeloopError(
                f"{where}: call {call.record.key} cannot be trusted: {problem}. Fix: restore the "
                "file from git, or re-record this call."
            )
        return call.current()

    def __getitem__(self, key: str) -> RecordedCall:
        verified = self._verified.get(key)
        if verified is None:
            line, _, blobs, where = self._found[key]
            verified = self._verified[key] = self._verify(line, blobs, where)
        return verified

    def contexts(self) -> Iterator[tuple[str, CallContext]]:
        """Each key with its call's context, unverified (where a call was made is what selects it)."""
        for key, (_, context, _, where) in self._found.items():
            try:
                yield key, CallContext.model_validate(context)
            except ValidationError as exc:
                raise JudgeloopError(
                    f"{where}: not a recorded call (its context: {_first_error(exc)}). Fix: restore "
                    "it from git, or re-record the stage."
                ) from exc

    def __contains__(self, key: object) -> bool:
        return key in self._found

    def __iter__(self) -> Iterator[str]:
        return iter(self._found)

    def __len__(self) -> int:
        return len(self._found)


def _first_error(exc: ValidationError) -> str:
    error = exc.errors(include_url=False)[0]
    return f"{'.'.join(str(part) for part in error['loc']) or 'the whole'}: {error['msg']}"


@dataclass(frozen=True)
class Run:
    """One side of a diff: its name as given, its judgements, and its recorded calls by key."""

    name: str
    judgements: dict[tuple[str, str, int, str], Judgement]
    calls: Mapping[str, RecordedCall]

    @property
    def unrecorded(self) -> tuple[int, int]:
        """(calls its judgements name that its recordings lack, calls they name): a run handed over
        without its recordings can say why a judgement changed only from its results."""
        named = [key for judgement in self.judgements.values() for key in judgement.keys]
        return sum(key not in self.calls for key in named), len(named)


def _git(args: list[str], cwd: Path) -> bytes:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False)
    if done.returncode != 0:
        raise JudgeloopError(done.stderr.decode("utf-8", "replace").strip() or f"git {' '.join(args)} failed")
    return done.stdout


def resolve_revision(name: str, project: Path) -> str:
    """The commit a git revision or a DVC experiment's name stands for."""
    if name.startswith("-"):  # never an option to git
        raise JudgeloopError(f"no run named {name!r}: a run's name does not start with '-'.")
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
    except Exception as exc:
        raise JudgeloopError(
            f"no run named {name!r} ({exc}). Fix: a commit, branch or tag, "
            "a name `dvc exp show` lists, `workspace`, or a run's folder."
        ) from exc
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
        for member in tar:
            _write_member(tar, member, into, commit)


def _write_member(tar: tarfile.TarFile, member: tarfile.TarInfo, into: Path, commit: str) -> None:
    """One member of git's archive written under `into`, as tarfile's "data" filter would (a folder,
    a file, or a link whose target stays inside `into`; nothing else, and no path leaving `into`).

    By hand rather than `extractall(filter="data")`: that argument came in Python 3.11.4, and
    Debian 12's python3, a supported Python, is 3.11.2. Links are written (not refused here) so that
    the readers meet them and refuse them by their own rule, naming the file.
    """
    path = into.joinpath(*PurePosixPath(member.name).parts)
    fix = "Fix: diff a revision whose tracked files are plain files."
    if _not_plain(member, path, into):
        raise JudgeloopError(
            f"revision {commit[:12]} holds {member.name!r}, which is not a plain file or folder inside "
            f"the run. {fix}"
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if member.isdir():
            path.mkdir(exist_ok=True)
        elif member.issym():
            path.symlink_to(member.linkname)
        elif (source := tar.extractfile(member)) is not None:  # (a regular file: always)
            path.write_bytes(source.read())
    except OSError as exc:  # a name given twice, as a file and as a folder (a tree git would flag)
        raise JudgeloopError(
            f"revision {commit[:12]} holds {member.name!r}, which cannot be written where an earlier "
            f"entry of the revision lies ({exc.strerror}). {fix}"
        ) from None


def _not_plain(member: tarfile.TarInfo, path: Path, into: Path) -> bool:
    """Whether `member` (to be written at `path`) is not a folder, a file or a link down the run, or
    would be written through a link: an earlier member may have made a folder on its way a link, or
    its own path one (a tree that names an entry twice), and mkdir or write_bytes would follow it."""
    parts = PurePosixPath(member.name).parts
    if not parts or member.name.startswith("/") or ".." in parts:
        return True
    if not (member.isdir() or member.isfile() or member.issym()):
        return True
    # A link only downward: its ".." is read from where it physically lies, which an earlier link on
    # its way (a duplicate entry "a" -> ".", then "a/b" -> "..") can move out of the run.
    if member.issym() and (member.linkname.startswith("/") or ".." in PurePosixPath(member.linkname).parts):
        return True
    return any(folder.is_symlink() for folder in [path, *path.parents] if into in folder.parents)


def _folder(name: str) -> Path | None:
    """The folder `name` is here, or None: also for a name no path can be (past the file system's
    255 bytes, a NUL in it), which is then looked up as a revision, not a traceback."""
    given = Path(name)
    try:
        return given if given.is_dir() else None
    except (OSError, ValueError):
        return None


def _refuse_two_runs(name: str, project: Path) -> None:
    """A folder here whose name is a git revision's or a DVC experiment's too (a folder `data`, a
    branch `data`) refused: which of the two runs was meant is not the diff's to guess. A name
    written as a path (from /, ./ or ../) names no revision (no git ref starts so), so it is the fix."""
    if name.startswith(("/", "./", "../")) or name in (".", ".."):
        return
    try:
        commit = resolve_revision(name, project)
    except JudgeloopError:
        return
    raise JudgeloopError(
        f"{name!r} names two runs: the folder {name} here and the git revision or experiment {name} "
        f"(commit {commit[:12]}). Fix: ./{name} for the folder, or the commit {commit[:12]} for the revision."
    )


@contextmanager
def run_folder(name: str, project: Path) -> Iterator[Path]:
    """The folder holding run `name`: the project itself, a folder given by path, or a revision's
    files written out to a temporary folder (removed afterwards). A name that is both a folder here
    and a revision is refused, with the fix for each."""
    if name == WORKSPACE:
        yield project
        return
    given = _folder(name)
    if given is not None:
        _refuse_two_runs(name, project)
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


def _twice(name: str, judgement: Judgement) -> str:
    return (
        f"run {name!r} gives the {judgement.design} judgement of item {judgement.item!r}, iteration "
        f"{judgement.iteration}, metric {judgement.metric!r} twice (its results name the item twice). "
        "Fix: rerun the stage that wrote them, or restore them from git."
    )


def read_run(name: str, project: Path, only: tuple[str, ...] = ()) -> Run:
    """Every judgement of run `name` (of the designs in `only`, or all), by pair key, and the calls
    recorded in its recordings folder(s)."""
    judgements: dict[tuple[str, str, int, str], Judgement] = {}
    read: dict[Path, VerifiedCalls] = {}
    with run_folder(name, project) as folder:
        for design in designs():
            if design.judgements is None or (only and design.name not in only):
                continue
            params = design.load_params(folder / PARAMS, environ={})
            where = RunFiles(folder, {}).path(params.cache.recordings)
            if where not in read:
                read[where] = VerifiedCalls(where)
            hook = load_ref(design.judgements)
            for judgement in hook(params, RunFiles(folder, read[where])):
                if judgement.pair_key in judgements:  # which of the two to compare is not ours to guess
                    raise JudgeloopError(_twice(name, judgement))
                judgements[judgement.pair_key] = judgement
    folders: list[Mapping[str, RecordedCall]] = list(read.values())
    calls = folders[0] if len(folders) == 1 else ChainMap(*folders)  # type: ignore[arg-type]
    return Run(name, judgements, calls)
