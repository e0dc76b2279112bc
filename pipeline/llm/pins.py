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
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pipeline.errors import LockMismatchError
from pipeline.llm.bounds import check_yaml
from pipeline.llm.files import TMP_SUFFIX

LOCK_FILE = "dvc.lock"
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's when built with it: dvc.lock is long


def dir_md5(directory: Path) -> str:
    """DVC's md5 of a folder output, as dvc.lock writes it (`<md5>.dir`)."""
    entries = sorted(
        (
            {
                "md5": hashlib.md5(path.read_bytes()).hexdigest(),
                "relpath": path.relative_to(directory).as_posix(),
            }
            for path in directory.rglob("*")
            if path.is_file() and not path.name.endswith(TMP_SUFFIX)
        ),
        key=lambda entry: entry["relpath"],
    )
    return hashlib.md5(json.dumps(entries, sort_keys=True).encode("utf-8")).hexdigest() + ".dir"


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


class Pins:
    """The recordings folders that dvc.lock (in `root`) pins, read when first needed; none when
    there is no dvc.lock (or no root)."""

    def __init__(self, root: Path | None = None, recordings: Path | None = None) -> None:
        self.lock = root / LOCK_FILE if root is not None else None
        self._recordings = recordings
        self._pins: dict[Path, Pin] | None = None
        self._guard = threading.Lock()

    def _read(self) -> dict[Path, Pin]:
        lock, recordings = self.lock, self._recordings
        if lock is None or recordings is None or not lock.is_file():
            return {}
        try:
            text = lock.read_text(encoding="utf-8")
            check_yaml(text)  # no alias bomb, no nesting past the composer's stack (pipeline.llm.bounds)
            data: Any = yaml.load(text, Loader=_LOADER)
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise LockMismatchError(
                f"{lock}: not readable YAML ({exc}), so the recordings it pins cannot be checked. "
                f"Fix: restore it from git (git checkout -- {lock.name})."
            ) from exc
        inside = recordings.resolve()
        pins: dict[Path, Pin] = {}
        stages = data.get("stages") if isinstance(data, dict) else None
        for name, stage in (stages if isinstance(stages, dict) else {}).items():
            listed = (
                stage.get("outs") if isinstance(stage, dict) else None
            )  # a shape DVC never writes: no pin
            outs = [
                o
                for o in (listed if isinstance(listed, list) else [])
                if isinstance(o, dict) and isinstance(o.get("path"), str)
            ]
            for out in outs:
                path, md5 = out["path"], out.get("md5")
                if not isinstance(md5, str) or not md5.endswith(".dir"):
                    continue
                resolved = (lock.parent / path).resolve()
                if resolved.parent == inside:
                    others = tuple(o["path"] for o in outs if o is not out)
                    pins[resolved] = Pin(str(name), path, md5, others)
        return pins

    def pin(self, directory: Path) -> Pin | None:
        with self._guard:
            if self._pins is None:
                self._pins = self._read()
            return self._pins.get(directory.resolve())

    def problem(self, directory: Path) -> str | None:
        """Why `directory` may not be read (it differs from its pin, naming the fix), or None."""
        pin = self.pin(directory)
        if pin is None or not directory.is_dir():
            return None
        found = dir_md5(directory)
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
