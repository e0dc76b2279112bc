"""What `judgeloop exp` copies aside before a run, to put the workspace back if the run fails.

    Snapshot(root, paths)              the copies, in .judgeloop/snapshots/exp-*, held under an flock
    name_killed_runs_snapshots(root)   each copy a run killed outright left, named with its commands
    judgeloop exp restore NAME         such a copy put back over the project, then removed
    judgeloop exp drop NAME            such a copy removed

A run killed outright (SIGKILL, OOM, power) cannot put anything back and leaves its copy, perhaps the
only one of the last good outputs: it is never removed for the user. The next `judgeloop exp` names
it with the two commands above; a live run's copy is told apart by its flock (which the kernel lets
go when the run dies), and neither command touches one. `restore` puts back what the failed run's own
restore would have: params.yaml and dvc.lock as they were, every stage's out as the copy holds it,
and an out the copy does not hold (new since) removed, the outs being those of dvc.yaml under
params.yaml both before (the copy's) and now.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import click

from pipeline.llm.files import named
from pipeline.llm.terminal import echo, shown

ALWAYS_KEPT = ("params.yaml", "dvc.lock")
SNAPSHOTS = Path(".judgeloop") / "snapshots"  # ignored by git, beside the local cache


def stage_outputs(root: Path) -> set[Path]:
    """Every out of every stage (results, recordings, metrics, plots), as dvc.yaml and params.yaml
    resolve them now."""
    from dvc.repo import Repo

    here = root.resolve()
    with Repo(str(root)) as repo:
        paths = {Path(out.fs_path) for stage in repo.index.stages for out in stage.outs}
    return {p.relative_to(here) for p in paths if p.is_relative_to(here)}


def outputs_or_none(root: Path) -> set[Path]:
    try:
        return stage_outputs(root)
    except Exception:  # a params.yaml DVC cannot read now: what was saved is put back all the same
        return set()


def _copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target, symlinks=True)
    else:
        shutil.copy2(source, target)


def _put_back(root: Path, folder: Path, paths: Iterable[Path], saved: set[Path]) -> None:
    """Each of `paths` in `root` as `folder` holds it: the saved ones copied back, the others removed."""
    for path in sorted(set(paths)):
        target = root / path
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
        if path in saved:
            _copy(folder / path, target)


class Snapshot:
    """Copies of files and folders of the project, to put back as they were."""

    def __init__(self, root: Path, paths: set[Path]) -> None:
        self.root = root
        (root / SNAPSHOTS).mkdir(parents=True, exist_ok=True)
        self.folder = Path(tempfile.mkdtemp(prefix="exp-", dir=root / SNAPSHOTS))
        try:  # held while this run lives (the kernel lets go if it is killed): see killed_runs_snapshots
            self._hold = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY)
        except BaseException:  # not an empty unlocked folder left, for the next run to name as a killed one's
            os.rmdir(self.folder)
            raise
        self.saved: set[Path] = set()
        try:
            fcntl.flock(self._hold, fcntl.LOCK_EX)  # (a network file system may refuse it)
            for path in sorted(paths):
                if (root / path).exists():
                    _copy(root / path, self.folder / path)
                    self.saved.add(path)
        except BaseException:  # (a full disk, a pipe among the outputs): nothing ran, nothing to put back
            self.discard()  # not left for the next run to name as a killed run's copy, nor held open
            raise
        self.paths = set(paths)

    def restore(self, also: Iterable[Path] = ()) -> None:
        """Every path as it was: the saved ones copied back, the others (new since) removed."""
        _put_back(self.root, self.folder, self.paths | set(also), self.saved)

    def discard(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        os.close(self._hold)


def killed_runs_snapshots(root: Path) -> list[Path]:
    """The snapshot folders that `judgeloop exp` runs killed outright left (no live run holds one locked),
    as paths under `root`; links and anything but a folder are passed over."""
    found = []
    for folder in sorted((root / SNAPSHOTS).glob("exp-*")):
        with contextlib.suppress(click.ClickException), _held(folder):
            found.append(folder)
    return found


@contextlib.contextmanager
def _held(folder: Path) -> Iterator[None]:
    """`folder`'s flock held while the block runs: ClickException where it is no folder (a link, a file,
    nothing) or a live run holds it."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except (OSError, ValueError) as exc:  # (ValueError: a NUL in the name)
        why = exc.strerror if isinstance(exc, OSError) else exc
        raise click.ClickException(f"{named(folder)}: no snapshot folder ({why})") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # BlockingIOError: a run at work
            raise click.ClickException(
                f"{named(folder)}: held by a `judgeloop exp` that is still running (it puts back or "
                "drops its own copy when it ends)"
            ) from None
        yield
    finally:
        os.close(fd)  # (and the lock with it)


def name_killed_runs_snapshots(root: Path) -> None:
    """Each snapshot a killed run left, named with what it holds and the commands that put it back or
    drop it (never removed here: it may be the only copy of the last good outputs)."""
    for folder in killed_runs_snapshots(root):
        # (a name a user gave a folder there may hold a newline or a terminal's escape: shown as escapes)
        path = shlex.quote(shown(os.path.relpath(folder, root), one_line=True))
        name = shlex.quote(shown(folder.name, one_line=True))
        echo(
            f"judgeloop exp: {path} holds what a `judgeloop exp` that was killed copied aside before it "
            "ran (params.yaml, dvc.lock and every stage's outputs as they were then, at the same paths "
            "under it), which that run could not put back. Fix: to go back to them, `judgeloop exp "
            f"restore {name}` (`diff -r {path}/params.yaml params.yaml` shows what the run changed); "
            f"once you do not need it, `judgeloop exp drop {name}`",
            err=True,
        )


def _snapshot_folder(root: Path, name: str) -> Path:
    """The snapshot `name` names (`exp-…`, or its path as name_killed_runs_snapshots prints it): one
    folder directly in SNAPSHOTS, never a path elsewhere."""
    given = Path(name)
    if given.parent in (Path("."), SNAPSHOTS) and given.name.startswith("exp-"):
        return root / SNAPSHOTS / given.name
    left = ", ".join(folder.name for folder in killed_runs_snapshots(root)) or "none"
    raise click.ClickException(
        f"{named(name)}: not a snapshot's name (exp-…, in {SNAPSHOTS}). Those a killed run left: {left}"
    )


def restore_snapshot(root: Path, name: str) -> None:
    """A killed run's snapshot put back over the project (see the module), then removed."""
    folder = _snapshot_folder(root, name)
    with _held(folder):
        after = outputs_or_none(root)  # the outs the killed run's params give
        kept = {Path(p) for p in ALWAYS_KEPT}
        _put_back(root, folder, kept, {p for p in kept if os.path.lexists(folder / p)})
        outs = after | outputs_or_none(root)  # and those the params put back give
        _put_back(root, folder, outs, {p for p in outs if os.path.lexists(folder / p)})
        shutil.rmtree(folder)
    echo(
        f"judgeloop exp: params.yaml, dvc.lock and every stage's outputs are back as {named(name)} held "
        "them, and it is removed.",
        err=True,
    )


def drop_snapshot(root: Path, name: str) -> None:
    """A killed run's snapshot removed."""
    folder = _snapshot_folder(root, name)
    with _held(folder):
        shutil.rmtree(folder)
    echo(f"judgeloop exp: {named(name)} removed.", err=True)
