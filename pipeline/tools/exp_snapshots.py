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

Which copy that is, is marked (MARK), once the copy is whole: the project it is of (its path and its
folder's inode, which no one who commits a folder or shares a disk can give another project) and
the paths it holds. A folder there without that mark (a run killed while it still copied, whose
half copy put back would remove every out it had not reached; one committed under a plain
`.judgeloop/`; one an older judgeloop left), or with another project's (two projects sharing one
`.judgeloop` on another disk; this one copied elsewhere), is named, never restored nor dropped by a
command: what it holds is copied by hand. And a link in the copy, where it holds a path or on the
way to one, is one `judgeloop exp` never made (a file's copy is the file): restore refuses it rather
than copy what it leads to over the project. Restore holds DVC's own lock of the project, as every
DVC run does, so that it never puts files back under a run at work (the next `judgeloop exp`, which
names the snapshot as it starts, or a `repro`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import click

from pipeline.llm.files import atomic_write_chunks, in_command, named, read_regular
from pipeline.llm.terminal import echo

ALWAYS_KEPT = ("params.yaml", "dvc.lock")
SNAPSHOTS = Path(".judgeloop") / "snapshots"  # ignored by git, beside the local cache
MARK = ".judgeloop-exp-of"  # in a whole copy: which project it is of, and the paths it holds
_MARK_LIMIT = 16 * 1024 * 1024


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
            if Path(MARK) in paths:
                raise click.ClickException(f"{MARK}: an out of this name would be taken for the copy's mark")
            for path in sorted(paths):
                if (root / path).exists():
                    _copy(root / path, self.folder / path)
                    self.saved.add(path)
            mark(root, self.folder, self.saved)  # last: a copy killed half made is never restored
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


def _project(root: Path) -> dict[str, object]:
    here = root.resolve()
    return {"inode": os.stat(here).st_ino, "root": str(here)}


def mark(root: Path, folder: Path, saved: Iterable[Path] = ()) -> None:
    """`folder` marked a whole copy of the project at `root` holding `saved` (see the module)."""
    text = json.dumps({**_project(root), "saved": sorted(str(path) for path in saved)}, sort_keys=True)
    atomic_write_chunks(folder / MARK, [text + "\n"], local_state=True)


def _saved(root: Path, folder: Path) -> set[Path] | None:
    """The paths the copy in `folder` holds, if it is a whole copy of the project at `root` (marked
    so); else None."""
    if os.path.islink(folder / MARK):  # (another snapshot's mark, say: the copy's own file only)
        return None
    try:
        marked = json.loads(read_regular(folder / MARK, _MARK_LIMIT))
        saved = {Path(path) for path in marked.pop("saved")}
    except (OSError, ValueError, TypeError, AttributeError, KeyError):  # none, unreadable, not ours
        return None
    if marked != _project(root) or any(p.is_absolute() or ".." in p.parts or not p.parts for p in saved):
        return None
    return saved


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
        if _saved(root, folder) is None:
            echo(f"judgeloop exp: {_not_this_project_s(root, folder)}", err=True)
            continue
        # (a name a user gave a folder there may hold a newline or a terminal's escape: shown as escapes)
        path, name = in_command(os.path.relpath(folder, root)), in_command(folder.name)
        echo(
            f"judgeloop exp: {path} holds what a `judgeloop exp` that was killed copied aside before it "
            "ran (params.yaml, dvc.lock and every stage's outputs as they were then, at the same paths "
            "under it), which that run could not put back. Fix: to go back to them, `judgeloop exp "
            f"restore {name}` (`diff -r {path}/params.yaml params.yaml` shows what the run changed); "
            f"once you do not need it, `judgeloop exp drop {name}`",
            err=True,
        )


def _not_this_project_s(root: Path, folder: Path) -> str:
    path = in_command(os.path.relpath(folder, root))
    return (
        f"{path} is not made by a `judgeloop exp` of this project, or not whole (it has no mark "
        f"{MARK} of this project: a run killed while it still copied, a folder committed under "
        ".judgeloop/ or another project's sharing it, one an older judgeloop made, or this project's "
        "before it was copied or moved): judgeloop neither puts it back nor removes it. Fix: copy what "
        f"you need from it by hand (`diff -r {path}/params.yaml params.yaml` shows how its params differ); "
        f"once you do not need it, rm -r -- {path}"
    )


def _links_in(folder: Path, path: Path) -> Path | None:
    """The first symbolic link on the way to `path` in `folder`, or at it; None where there is none."""
    step = folder
    for part in path.parts:
        step = step / part
        with contextlib.suppress(OSError):
            if os.path.islink(step):
                return step
    return None


def _checked(root: Path, folder: Path) -> set[Path]:
    """The paths the snapshot in `folder` holds, once it is known to be this project's whole copy with
    no link where it holds a path or on the way to one (ClickException otherwise)."""
    saved = _saved(root, folder)
    if saved is None:
        raise click.ClickException(_not_this_project_s(root, folder))
    for path in sorted(saved):
        link = _links_in(folder, path)
        if link is not None:
            raise click.ClickException(
                f"{named(link)}: a symbolic link (to {named(os.readlink(link))}) in a snapshot, which "
                "`judgeloop exp` never makes there (it copies a file, not a link): not restored. Fix: "
                f"copy what you need from it by hand; once you do not need it, rm -r -- {in_command(folder)}"
            )
    return saved


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


@contextlib.contextmanager
def _no_dvc_run(root: Path) -> Iterator[None]:
    """DVC's lock of the project at `root` held while the block runs (none where it is no DVC project):
    ClickException where a DVC run holds it (after DVC's own few seconds of waiting)."""
    from dvc.exceptions import NotDvcRepoError
    from dvc.lock import LockError
    from dvc.repo import Repo

    try:
        repo = Repo(str(root))
    except NotDvcRepoError:
        yield
        return
    with repo:
        try:
            repo.lock.lock()
        except LockError:
            raise click.ClickException(
                "a DVC run is at work in this project (a `judgeloop exp` or `repro`): nothing is put back "
                "under it. Fix: run `judgeloop exp restore` again once it has ended"
            ) from None
        try:
            yield
        finally:
            repo.lock.unlock()


def restore_snapshot(root: Path, name: str) -> None:
    """A killed run's snapshot put back over the project (see the module), then removed."""
    folder = _snapshot_folder(root, name)
    with _held(folder), _no_dvc_run(root):
        saved = _checked(root, folder)
        after = outputs_or_none(root)  # the outs the killed run's params give
        kept = {Path(p) for p in ALWAYS_KEPT}
        _put_back(root, folder, kept, saved & kept)
        outs = after | outputs_or_none(root) | saved  # and those the params put back give
        _put_back(root, folder, outs - kept, saved)
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
        _checked(root, folder)
        shutil.rmtree(folder)
    echo(f"judgeloop exp: {named(name)} removed.", err=True)
