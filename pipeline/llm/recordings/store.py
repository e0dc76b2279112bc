"""Where the recordings are kept between machines: in git (the default) or in DVC's cache.

`cache.recordings_store: git` (the committed demos): each LLM stage's recordings/<stage>/ is a DVC
output with `cache: false`, a git file like any other, and a clone has it.

`cache.recordings_store: dvc` (a run of thousands to millions of calls, whose every rerun git would
keep forever): the folder is a cached DVC output. dvc.lock holds its hash as before (so the pin of
pipeline.llm.recordings.pins is unchanged), DVC's .gitignore keeps it out of git, `dvc push` sends it to the
project's remote and `dvc pull` brings it back. A clone then holds the hashes only, and a stage
that would read a recording that is not here says so, naming `dvc pull`, rather than failing later
on a call that is "not recorded" (replay) or calling the model again for it (auto).

This module reads dvc.lock for the folders it pins and says which are absent; it never trusts
what it reads beyond that: the folder, once pulled, is checked against its pin when read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from pipeline.llm.bounds import MAX_LINE_BYTES, check_yaml
from pipeline.llm.files import read_regular
from pipeline.llm.recordings.pins import LOCK_FILE
from pipeline.llm.recordings.stage_folders import has_recording

RecordingsStore = Literal["git", "dvc"]
STORES: tuple[RecordingsStore, ...] = ("git", "dvc")
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class Absent:
    """A recordings folder that dvc.lock pins and that is not here."""

    dvc_stage: str
    path: str  # as dvc.lock writes it


def pinned_folders(root: Path, recordings: Path) -> dict[Path, Absent]:
    """Every folder right under `recordings` that dvc.lock (in `root`) pins, by resolved path."""
    lock = root / LOCK_FILE
    if not lock.is_file():
        return {}
    data = _bounded_yaml(lock)  # None: the pin's own check names an unreadable dvc.lock, with its fix
    inside = recordings.resolve()
    found: dict[Path, Absent] = {}
    stages = data.get("stages") if isinstance(data, dict) else None
    for name, stage in (stages if isinstance(stages, dict) else {}).items():
        for path in _folder_outs(stage):
            try:
                resolved = (root / path).resolve()
            except (OSError, ValueError):  # a NUL in the path, a loop of links: no folder of ours
                continue
            if resolved.parent == inside:
                found[resolved] = Absent(str(name), path)
    return found


def _bounded_yaml(path: Path) -> Any:
    """The YAML file, bounded before it is composed (pipeline.llm.bounds); None if unreadable."""
    try:
        text = read_regular(path, MAX_LINE_BYTES).decode("utf-8")  # never a pipe or /dev/zero
        check_yaml(text)
        return yaml.load(text, Loader=_LOADER)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None


def _folder_outs(stage: Any) -> list[str]:
    """A dvc.lock stage's folder outputs (their md5 ends in `.dir`)."""
    outs = stage.get("outs") if isinstance(stage, dict) else None
    return [
        out["path"]
        for out in (outs if isinstance(outs, list) else [])
        if isinstance(out, dict)
        and isinstance(out.get("path"), str)
        and str(out.get("md5", "")).endswith(".dir")
    ]


def absent(root: Path, recordings: Path, stages: tuple[str, ...] = ()) -> list[Absent]:
    """The pinned recordings folders (of `stages`, or all) that hold no recording here."""
    return [
        entry
        for folder, entry in sorted(pinned_folders(root, recordings).items())
        if (not stages or folder.name in stages) and not has_recording(folder)
    ]


def absent_message(missing: list[Absent], store: RecordingsStore) -> str:
    """What is not here, where it is, and the command that brings it back."""
    paths = ", ".join(entry.path for entry in missing)
    stages = " ".join(entry.dvc_stage for entry in missing)
    if store == "dvc":
        return (
            f"{paths}: pinned in {LOCK_FILE} but not here. With cache.recordings_store: dvc the "
            "recordings are kept in DVC's cache and the project's remote, not in git. Fix: `dvc pull` "
            f"brings them (`dvc pull {stages}` for these alone; `dvc remote list` names the remote)."
        )
    return (
        f"{paths}: pinned in {LOCK_FILE} but not here. Fix: restore them from git "
        f"(`git checkout -- {' '.join(entry.path for entry in missing)}`); if this project keeps its "
        "recordings in DVC (cache.recordings_store: dvc), `dvc pull` brings them."
    )


def configured_store(root: Path) -> RecordingsStore:
    """cache.recordings_store as params.yaml (in `root`) sets it; git when unset or unreadable (the
    stages themselves validate params.yaml and name its problems)."""
    data = _bounded_yaml(root / "params.yaml")
    cache = data.get("cache") if isinstance(data, dict) else None
    store = cache.get("recordings_store") if isinstance(cache, dict) else None
    return "dvc" if store == "dvc" else "git"


def missing_here(recordings: Path, stages: tuple[str, ...] = (), root: Path = Path(".")) -> str | None:
    """The message for pinned recordings (of `stages`, or all) that are not here, or None."""
    missing = absent(root, recordings, stages)
    return absent_message(missing, configured_store(root)) if missing else None
