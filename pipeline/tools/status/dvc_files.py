"""Which stage files DVC would collect, found without DVC's walk of the workspace (issue 33).

To list a project's stages, DVC walks every folder of the workspace for dvc.yaml and .dvc files,
at about 0.1 ms a folder (its .dvcignore trie): a data folder of one subfolder per interview makes
that a walk per item, before any stage is checked. DVC skips what git ignores, so git's own list of
the files it tracks or would track (`git ls-files --cached --others --exclude-standard`, from its
index and a walk in C) holds every stage file DVC can find, and possibly more (files .dvcignore
hides, files deleted since they were added). When that list names no stage file but the project's
own dvc.yaml, the stages are read from that one file; in any other case (another stage file, no
git, DVC told not to use git, git failing) DVC collects them as it always does.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

PROJECT_FILE = "dvc.yaml"
# Tracked and untracked files, less what git ignores, that DVC could read stages from.
LS_FILES = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "*.dvc", "*dvc.yaml"]


def _stage_file(name: str) -> bool:
    """A name DVC reads stages from (dvc.dvcfile.is_valid_filename)."""
    return name.endswith(".dvc") or name.rsplit("/", 1)[-1] == PROJECT_FILE


def only_project_file(root: Path) -> bool:
    """Git lists no stage file under `root` other than its own dvc.yaml (False: it cannot say)."""
    if not (root / PROJECT_FILE).is_file():
        return False
    try:
        listed = subprocess.run(LS_FILES, cwd=root, capture_output=True, check=True, timeout=120).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    names = {name for name in listed.decode("utf-8", "surrogateescape").split("\0") if name}
    return {name for name in names if _stage_file(name)} == {PROJECT_FILE}


def uses_git(repo: Any) -> bool:
    """DVC consults git for what it ignores: a git workspace, and core.no_scm not set."""
    from dvc.scm import NoSCM

    return not isinstance(repo.scm, NoSCM) and not repo.config["core"].get("no_scm", False)


def stages_and_status(repo: Any) -> tuple[Any, dict[str, Any]]:
    """The project's stage graph and `dvc status`, from its dvc.yaml alone where that is every stage
    file DVC would find (only_project_file), else from DVC's own collection."""
    root = Path(repo.root_dir)
    if uses_git(repo) and only_project_file(root):
        from dvc.repo.graph import build_graph

        target = str(root / PROJECT_FILE)
        stages = list(repo.stage.collect(target))
        return build_graph(stages), repo.status(targets=[target])
    return repo.index.graph, repo.status()
