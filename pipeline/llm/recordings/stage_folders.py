"""A stage's recordings folder: the names of its files, the stage's name as a folder, its guards.

Stage names become folder names, so a name read from the command line or from a file is checked
(pipeline.llm.files.child): a plain name that stays inside the recordings folder. A stage folder
that is a symbolic link, or holds one, is refused before it is read or written
(pipeline.llm.files.refuse_links): through it a stage would write, or read, another's recording.
One exception: a file's link that DVC checked out into its own cache (`dvc config cache.type
symlink`, cache.recordings_store: dvc) is read as the file it leads to, its bytes verified as any
file's (pipeline.llm.recordings.dvc_links).
"""

from __future__ import annotations

from pathlib import Path

from pipeline.llm.files import child, refuse_links
from pipeline.llm.recordings.dvc_links import cache_file

CALLS_FILE = "calls.jsonl"
LEGACY_BLOBS_FILE = "blobs.jsonl"  # the shared blocks' own file, before they moved into calls.jsonl
STAGE_FIX = "name the stage with letters, digits, '.', '_' and '-' only"
LINK_FIX = "then restore the stage's recording from git (git checkout -- recordings/), or re-record the stage"


def stage_dir(root: Path, stage: str) -> Path:
    """root / stage, for a stage name that is a plain name and stays inside root."""
    return child(root, stage, "stage", STAGE_FIX)


def refuse_linked(directory: Path) -> None:
    """UnsafeNameError if the stage folder is a symbolic link or holds one, however deep, other than
    a file's link into DVC's cache, which DVC checked out and is read as a file (dvc_links)."""
    refuse_links(directory, "the recordings", LINK_FIX, itself=True, below=True, read_as_file=cache_file)


def has_recording(directory: Path) -> bool:
    return (directory / CALLS_FILE).is_file()


def stage_dirs(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if has_recording(p))
