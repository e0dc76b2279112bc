"""What DVC says of the project for `judgeloop status` (pipeline.tools.status.command): which stages
are out of date, and why, and which stages each stage reads the outputs of (its stage graph)."""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.llm.recordings import dvc_links
from pipeline.llm.recordings.dvc_links import DVC_DIR
from pipeline.llm.terminal import shown
from pipeline.tools import code_digests
from pipeline.tools.status.dvc_files import stages_and_status
from pipeline.tools.status.dvc_hashes import one_hash_per_path

__all__ = ["DvcView", "dvc_view"]


def _describe(changes: Any) -> str:
    parts = []
    for entry in changes if isinstance(changes, list) else [changes]:
        if not isinstance(entry, dict):
            parts.append(str(entry))
            continue
        for kind, paths in entry.items():
            if isinstance(paths, dict):
                named = [f"{p} ({', '.join(v)})" if isinstance(v, dict) else str(p) for p, v in paths.items()]
                parts.append(f"{kind}: {', '.join(named)}")
            else:
                parts.append(f"{kind}: {paths}")
    return "; ".join(parts) or "out of date"


@dataclass
class DvcView:
    """What DVC says of the project: which stages are out of date (None: it cannot say, and why),
    and which stages each stage reads the outputs of (its stage graph, so a new design's stages
    are seen without code here knowing them)."""

    changed: dict[str, str] | None
    how: str
    upstream: dict[str, tuple[str, ...]] = field(default_factory=dict)


# What DVC's own `dvc status` fails on with a bare traceback: an out checked out as a link
# (`dvc config cache.type symlink`) into a DVC cache that no longer holds the file.
_GONE = (
    "a link whose file is gone (DVC's cache no longer holds it: `dvc gc`, or a cache on a disk not "
    "mounted). Fix: `dvc pull` brings it back (`dvc checkout` where the cache still holds it)"
)


_CONFIG_FIX = "Fix: put DVC's config there as a file (the one git holds, for .dvc/config), or remove it"


def _unreadable(exc: OSError) -> str:
    """What DVC's status could not read, said: a link into DVC's cache whose file is gone (_GONE), or
    another link that leads to no file (out of the project, to itself), named with where it leads."""
    name = exc.filename
    if not isinstance(name, str) or not os.path.islink(name):
        return str(exc)
    # The names are the workspace's (a pull request's links): on one line, every control escaped.
    if exc.errno == errno.ENOENT and dvc_links.leads_into_cache(Path(name)):
        return f"{shown(name, one_line=True)}: {_GONE}"
    return (
        f"{shown(name, one_line=True)}: a link to {shown(os.readlink(name), one_line=True)}, which "
        f"leads to no file ({exc.strerror}). "
        "Fix: put the file itself in its place (`dvc checkout` where DVC tracks it)"
    )


def dvc_view() -> DvcView:
    try:
        from dvc.exceptions import DvcException, NotDvcRepoError
        from dvc.repo import Repo, lock_repo
    except ImportError:
        return DvcView(None, "DVC is not installed")
    odd = dvc_links.unreadable_config(DVC_DIR)
    if odd is not None:  # DVC would read it, and wait for good on a pipe (a pull request's link)
        return DvcView(None, f"dvc status not asked: {shown(odd, one_line=True)}. {_CONFIG_FIX}")
    try:
        # Under one lock, the graph and the status share one index: Repo.status, locked on its own,
        # drops the index and collects it again (the whole workspace walked twice: issue 33). A
        # folder several stages name is hashed once (pipeline.tools.status.dvc_hashes), and the stages
        # are read from dvc.yaml without a walk of the workspace where git shows no other stage
        # file (pipeline.tools.status.dvc_files).
        with Repo(".") as repo, lock_repo(repo), one_hash_per_path():
            graph, status = stages_and_status(repo)
            upstream = {
                str(stage.addressing): tuple(str(s.addressing) for s in graph.successors(stage))
                for stage in graph.nodes
            }
            root, locked = Path(repo.root_dir), _locked_digests(graph.nodes)
    except NotDvcRepoError:
        return DvcView(None, "not a DVC project")
    except DvcException as exc:
        return DvcView(None, f"dvc status failed: {exc}")
    except OSError as exc:  # DVC hashes an out through a link that leads to no file (gone, a loop)
        return DvcView(None, f"dvc status failed: {_unreadable(exc)}")
    changed = {str(name).rsplit(":", 1)[-1]: _describe(c) for name, c in status.items()}
    # A stage depends on its code digest, not its modules: the module that changed is named here.
    return DvcView(code_digests.explained(changed, root, locked), "dvc status", upstream)


def _locked_digests(stages: Any) -> dict[str, str]:
    """Stage -> the md5 dvc.lock locks its code digest at (pipeline.tools.code_digests)."""
    return {
        str(stage.addressing): str(dep.hash_info.value)
        for stage in stages
        for dep in stage.deps
        if dep.def_path == code_digests.digest_path(str(stage.addressing)) and dep.hash_info
    }
