"""Two runs as DVC reads them for `judgeloop compare` and `judgeloop exp list`: each run's metrics
files and params files (dvc.repo.Repo.metrics/params.show), and a clear error for a run that names
nothing DVC can read: an unknown name, a revision that is no commit (HEAD:params.yaml), a file DVC
cannot parse (said in the table, as Unreadable)."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

from pipeline.errors import JudgeloopError

WORKSPACE = "workspace"
FIX_RUN = (
    "Fix: a commit, branch or tag (`git log --oneline`, `git branch -a`), an experiment's name "
    "(`dvc exp show`), or `workspace`."
)


class Unreadable(dict[str, Any]):
    """A run's file DVC could not read or that holds no mapping: empty, as DVC reads it, with why."""

    def __init__(self, why: str) -> None:
        super().__init__()
        self.why = why


def _entry(shown: Mapping[str, Any], rev: str) -> Any:
    """DVC's answer for `rev`: under its name, or under the key DVC gives two names of one commit
    ("main,HEAD"); asked for no revision (both runs the workspace), DVC names the workspace ""."""
    if rev in shown:
        return shown[rev]
    for key, entry in shown.items():
        if rev in key.split(","):
            return entry
    return shown.get("") if rev == WORKSPACE else None


def _file(file: Mapping[str, Any]) -> dict[str, Any]:
    data = file.get("data", {})
    if "error" in file and not data:
        return Unreadable(f"DVC cannot read it: {file['error']}")
    return data if isinstance(data, dict) else Unreadable("it holds no mapping")


def _by_rev(shown: Mapping[str, Any], revs: Sequence[str]) -> dict[str, dict[str, Any]]:
    """{rev: {file: its data}} from DVC's show(), every rev asked for (an unknown one is an error).
    A file DVC could not parse, or whose data is not a mapping, is read as empty, as DVC itself
    reads a metrics file of another shape (Unreadable, which says why)."""
    out: dict[str, dict[str, Any]] = {}
    for rev in revs:
        entry = _entry(shown, rev)
        if entry is None:
            raise JudgeloopError(f"no run named {rev!r}. {FIX_RUN}")
        if "error" in entry and not entry.get("data"):
            raise JudgeloopError(
                f"cannot read run {rev!r}: {entry['error']}. Fix: correct that file in the run "
                "(`dvc exp show` names it too), or compare another run."
            )
        out[rev] = {path: _file(file) for path, file in entry.get("data", {}).items()}
    return out


def read_runs(revs: Sequence[str]) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Each run's metrics files and params files, as DVC reads them."""
    from dvc.exceptions import DvcException
    from dvc.repo import Repo
    from dvc.scm import RevError

    asked = [r for r in revs if r != WORKSPACE]
    try:
        with Repo(".") as repo:
            metrics = repo.metrics.show(revs=asked or None, hide_workspace=False)
            params = repo.params.show(revs=asked or None, hide_workspace=False)
    except (DvcException, RevError) as exc:
        raise _unreadable(revs, exc) from exc
    except AttributeError as exc:  # pygit2 inside DVC, given a tree or a blob for a commit
        raise _unreadable(revs, exc, _kinds(revs)) from exc
    return _by_rev(metrics, revs), _by_rev(params, revs)


def _kinds(revs: Sequence[str]) -> dict[str, str]:
    """What git's object each run names is, for those that name one that is not a commit
    (HEAD:params.yaml, a blob; HEAD^{tree}, a tree)."""
    kinds = {}
    for rev in revs:
        if rev == WORKSPACE or rev.startswith("-"):
            continue
        try:
            done = subprocess.run(["git", "cat-file", "-t", rev], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            continue
        kind = done.stdout.strip()
        if done.returncode == 0 and kind not in ("commit", "tag"):
            kinds[rev] = kind
    return kinds


def _unreadable(
    revs: Sequence[str], exc: Exception, kinds: Mapping[str, str] | None = None
) -> JudgeloopError:
    """The error for runs DVC could not read: the run that names no commit or that its message
    names, if one, and the fix."""
    if kinds:
        rev, kind = next(iter(kinds.items()))
        return JudgeloopError(f"{rev!r} names a {kind}, not a commit. {FIX_RUN}")
    named = [rev for rev in dict.fromkeys(revs) if f"'{rev}'" in str(exc)]
    if len(named) == 1:
        return JudgeloopError(f"no run named {named[0]!r} ({exc}). {FIX_RUN}")
    return JudgeloopError(f"cannot read the runs {' and '.join(map(repr, revs))}: {exc}. {FIX_RUN}")
