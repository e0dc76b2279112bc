"""A stage's recording pinned by the pipeline's own lock: an edit shows, and is refused.

Each record's checksum catches damage, not an edit: whoever changes a reply can recompute its
checksum. What an edit cannot avoid is changing the recording's bytes, and dvc.lock already holds
the md5 of every stage's recording folder (the recordings are the stages' outputs, `cache: false`),
committed with the outputs they produced. So a recording is read only if its folder still hashes
to its entry in dvc.lock: an edit made after the stage ran fails the stage that would read it,
naming the stage, until the recording is restored from git or re-locked on purpose
(`dvc commit --force <stage>`, which then shows as a changed dvc.lock in `git diff`; DVC removed
the stage's other outputs before running it, and refuses to commit a stage with one missing, so
the command given first restores them from git).

The hash is DVC's own for a folder output (dvc-data's Tree): md5 of the JSON list of
{"md5": md5 of the file's bytes, "relpath": ...} sorted by relpath, with ".dir" appended;
tests/test_trust_lock.py checks it against DVC. Temporary files (`*.tmp`, which .dvcignore makes
DVC skip too) are left out. A folder that dvc.lock does not name (a judge-evaluate stage, an
experiment without DVC) has no pin and is read as it is.

Whose entry pins a folder. Only the entry of the stage that owns the folder: the stage whose `outs`
name it in dvc.yaml (without a dvc.yaml, the stage named like the folder, as `judgeloop dvc-yaml`
writes them). A dvc.lock that names a recordings folder under any other stage, one dvc.yaml does
not define among them, or names a stage twice, is refused for that folder: otherwise a stage
appended to dvc.lock with a forged md5 let a forged recording through (and a replay then relocked
the real entry to it).

What is hashed is what is read. `pinned_files` reads each file of the folder once, hashes those
bytes and hands the same bytes to the reader (pipeline.llm.recordings.stage_reader); a session's reader
(pipeline.llm.recordings.folder_scan) streams each file once, hashing it as it places its lines, and
gives `check_hashes` those md5s; each line it serves later is checked against a digest of the bytes
hashed. Either way a file swapped between the check and the read is never served.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import CorruptRecordError, LockMismatchError
from pipeline.llm.files import TMP_SUFFIX
from pipeline.llm.recordings import shards
from pipeline.llm.recordings.owners import (
    PIPELINE_FILE,
    load_yaml,
    out_path,
    outs_of,
    recording_owners,
    resolved_out,
    stages_of,
)

LOCK_FILE = "dvc.lock"
MAX_FILE_BYTES = 4 * 2**30  # as pipeline.llm.recordings.line_checks.MAX_RECORDING_BYTES: more is no recording


def _folder_paths(directory: Path) -> list[Path]:
    """Every file of a folder output in DVC's order (`*.tmp` left out, as DVC does); what a killed
    writer left deleted first (shards.clear_killed_writer)."""
    shards.clear_killed_writer(directory)
    return [p for p in sorted(directory.rglob("*")) if p.is_file() and not p.name.endswith(TMP_SUFFIX)]


def folder_files(directory: Path) -> dict[str, bytes]:
    """Every file of a folder output by its relpath, read once (as _folder_paths lists them)."""
    files: dict[str, bytes] = {}
    for path in _folder_paths(directory):
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise CorruptRecordError(
                f"{path}: {size / 2**30:.1f} GiB, more than a recording holds. "
                f"Fix: restore the file from git (git checkout -- {path}), or re-record the stage."
            )
        files[path.relative_to(directory).as_posix()] = path.read_bytes()
    return files


def files_md5(files: dict[str, bytes]) -> str:
    """DVC's md5 of a folder output with these files, as dvc.lock writes it (`<md5>.dir`)."""
    return md5s_md5({rel: hashlib.md5(data).hexdigest() for rel, data in files.items()})


def md5s_md5(md5s: dict[str, str]) -> str:
    """DVC's md5 of a folder output whose files (by relpath) have these md5s."""
    entries = [{"md5": md5, "relpath": rel} for rel, md5 in sorted(md5s.items())]
    return hashlib.md5(json.dumps(entries, sort_keys=True).encode("utf-8")).hexdigest() + ".dir"


def dir_md5(directory: Path) -> str:
    """DVC's md5 of a folder output, as dvc.lock writes it (`<md5>.dir`), each file hashed a chunk at
    a time: `judgeloop check` hashes whole recordings and report folders (3.3 GB for refine's at 1M
    calls), which folder_files would hold whole."""
    md5s = {}
    for path in _folder_paths(directory):
        with path.open("rb") as stream:
            md5s[path.relative_to(directory).as_posix()] = hashlib.file_digest(stream, "md5").hexdigest()
    return md5s_md5(md5s)


@dataclass(frozen=True)
class Pin:
    dvc_stage: str  # the stage in dvc.yaml whose output the folder is
    path: str  # as dvc.lock writes it
    md5: str
    other_outs: tuple[str, ...] = ()  # the stage's other outputs (`dvc commit` needs them present)

    def relock(self) -> str:
        """The commands that re-lock the recording as it is now: DVC removed the stage's other
        outputs before running it, and `dvc commit` refuses a stage with an output missing."""
        restore = f"git checkout -- {' '.join(self.other_outs)} && " if self.other_outs else ""
        return f"{restore}dvc commit --force {self.dvc_stage}"


@dataclass(frozen=True)
class _Refused:
    """A recordings folder that dvc.lock names under a stage that does not own it."""

    path: str
    stage: str
    owner: str | None
    twice: bool = False

    def problem(self) -> str:
        if self.twice:
            named = f"names {self.path} twice under stage '{self.stage}'"
        else:
            owner = f"stage '{self.owner}' owns it" if self.owner else "no stage owns it"
            named = f"names {self.path} under stage '{self.stage}', but {owner} per {PIPELINE_FILE}"
        return (
            f"{LOCK_FILE} {named}: such an entry could pin the recording to another md5 than its own "
            f"stage's, so {self.path} is refused. Fix: restore {LOCK_FILE} from git "
            f"(git checkout -- {LOCK_FILE}), or relock the stage that owns it"
        )


class Pins:
    """The recordings folders that dvc.lock (in `root`) pins, read when first needed; none when
    there is no dvc.lock (or no root)."""

    def __init__(self, root: Path | None = None, recordings: Path | None = None) -> None:
        self.lock = root / LOCK_FILE if root is not None else None
        self._recordings = recordings
        self._pins: dict[Path, Pin | _Refused] | None = None
        self._guard = threading.Lock()

    def _read(self) -> dict[Path, Pin | _Refused]:
        lock, recordings = self.lock, self._recordings
        if lock is None or recordings is None or not lock.is_file():
            return {}
        data = load_yaml(lock, "the recordings it pins")
        inside = recordings.resolve()
        owners = recording_owners(lock.parent, recordings)
        pins: dict[Path, Pin | _Refused] = {}
        for name, stage in stages_of(data).items():
            entries = [(out, path) for out in outs_of(stage) if (path := out_path(out)) is not None]
            paths = [path for _, path in entries]
            for out, path in entries:
                resolved = resolved_out(lock.parent, path, lock)
                if resolved.parent != inside or isinstance(pins.get(resolved), _Refused):
                    continue
                owner = owners.get(resolved) if owners is not None else resolved.name
                md5 = out.get("md5") if isinstance(out, dict) else None
                if str(name) != owner or resolved in pins:
                    pins[resolved] = _Refused(path, str(name), owner, twice=str(name) == owner)
                elif isinstance(md5, str) and md5.endswith(".dir"):
                    pins[resolved] = Pin(str(name), path, md5, tuple(p for p in paths if p != path))
        return pins

    def _entry(self, directory: Path) -> Pin | _Refused | None:
        with self._guard:
            if self._pins is None:
                self._pins = self._read()
            return self._pins.get(directory.resolve())

    def pin(self, directory: Path) -> Pin | None:
        entry = self._entry(directory)
        return entry if isinstance(entry, Pin) else None

    def problem(self, directory: Path) -> str | None:
        """Why `directory` may not be read (it differs from its pin, naming the fix), or None."""
        return self._problem(directory, None)

    def pinned_files(self, directory: Path) -> dict[str, bytes]:
        """The folder's files, each read once, that match its pin (if it has one): the bytes to parse.
        LockMismatchError, naming the fix, for a folder that does not."""
        files = folder_files(directory) if directory.is_dir() else {}
        problem = self._problem(directory, files)
        if problem is not None:
            raise LockMismatchError(problem)
        return files

    def needs_hashes(self, directory: Path) -> bool:
        """Whether dvc.lock pins `directory` (or refuses it): then check_hashes must be called."""
        return self._entry(directory) is not None

    def check_hashes(self, directory: Path, md5s: dict[str, str]) -> None:
        """LockMismatchError, naming the fix, unless the folder whose files (by relpath) have these
        md5s, as its reader read them, matches its pin."""
        problem = self._problem(directory, None, md5s)
        if problem is not None:
            raise LockMismatchError(problem)

    def _problem(
        self, directory: Path, files: dict[str, bytes] | None, md5s: dict[str, str] | None = None
    ) -> str | None:
        entry = self._entry(directory)
        if isinstance(entry, _Refused):
            return entry.problem()
        pin = entry
        if pin is None or not directory.is_dir():
            return None
        if md5s is not None:
            found = md5s_md5(md5s)
        else:
            found = files_md5(files if files is not None else folder_files(directory))
        if found == pin.md5:
            return None
        return (
            f"{pin.path} does not match its entry in {LOCK_FILE} (stage '{pin.dvc_stage}': locked "
            f"{pin.md5}, found {found}): it was changed after the stage ran, and is refused. Fix: restore "
            f"it (`git checkout -- {pin.path}`); or, if the change is intended, re-lock it on purpose: "
            f"`{pin.relock()}` (with the environment activated: `. .venv/bin/activate`), then "
            f"`make replay ARGS={pin.dvc_stage}` recomputes the stage's outputs from it; commit dvc.lock "
            "with them"
        )

    def check(self, directory: Path) -> None:
        problem = self.problem(directory)
        if problem is not None:
            raise LockMismatchError(problem)
