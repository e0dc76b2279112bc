"""The local state's folder (`.judgeloop`: the cache, run summaries, memos, batch rounds, snapshots)
committed to git, which it never should be.

    committed_local_state(root)   what git tracks at .judgeloop, as a message with its fix; or None

`.gitignore` ignores `.judgeloop` (a folder, a file or a link), so only `git add -f` (or a pull
request changing .gitignore) commits it. Two cases, told apart because they weigh differently:

- `.judgeloop` committed as a symbolic link, or a link committed in it (`.judgeloop/cache`, `runs`,
  `snapshots`: the same redirection one level down). judgeloop writes its local state wherever that
  link leads (a user's way to put the cache on another disk), trusting the link as the user's own; a
  committed one is whoever committed it's, and every clone would write its cache and memos there.
  `judgeloop repro` and `judgeloop exp` refuse to run (RefusedLocalState); `status` and `check`
  say so first.
- Files under a `.judgeloop` folder committed (a cache, a batch export): nothing is redirected, and
  what is read from them is verified as any other person's file, but every clone starts from that
  state and every commit carries it. `status` and `check` say so first; nothing refuses.

The fix is `git rm -r --cached .judgeloop` and a commit: the working copy stays as it is (ignored
from then on), so a link a user made for themselves keeps working.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from pipeline.errors import ConfigError
from pipeline.llm.files import LOCAL_STATE, in_command, named

LINK_MODE = "120000"  # git's mode of a symbolic link
FIX = f"git rm -r --cached {LOCAL_STATE} && git commit -m 'untrack {LOCAL_STATE}'"


class RefusedLocalState(ConfigError):
    """`.judgeloop` is a symbolic link committed to git: judgeloop will not write its state there."""


def committed_local_state(root: Path) -> tuple[bool, str] | None:
    """(whether `.judgeloop` is committed as a link, the message saying what is committed and the fix);
    None where git tracks nothing there (or there is no git, or no repository)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-s", "-z", "--", LOCAL_STATE],
            cwd=root,
            capture_output=True,
            check=False,
            timeout=60,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    entries = [entry for entry in listed.stdout.split(b"\0") if entry] if listed.returncode == 0 else []
    if not entries:
        return None
    modes = {os.fsdecode(entry.split(b"\t", 1)[-1]): entry.split(b" ", 1)[0].decode() for entry in entries}
    linked = sorted(path for path, mode in modes.items() if mode == LINK_MODE)
    if linked:
        link = root / linked[0]
        leads = f"to {named(os.readlink(link))}" if link.is_symlink() else "not checked out here"
        return True, (
            f"{named(linked[0])} is a symbolic link committed to git ({leads}): judgeloop writes its local "
            "state (the cache, run summaries, memos, snapshots) wherever that link leads, a place the "
            f"one who committed it chose, not you. Fix: {FIX}; then keep the link if you made it "
            f"yourself (git ignores it from then on), or remove it (rm -- {in_command(linked[0])})"
        )
    return False, (
        f"{len(entries)} file(s) under {LOCAL_STATE}/ are committed to git ({named(next(iter(modes)))}"
        f"{', …' if len(entries) > 1 else ''}): it is this machine's local state (the cache, run "
        "summaries, memos, snapshots), which every clone would start from and every commit carry. "
        f"Fix: {FIX} (the files stay here)"
    )


def refuse_committed_link(root: Path) -> None:
    """RefusedLocalState where `.judgeloop`, or a link in it, is a symbolic link committed to git (see
    the module): asked of git only where `.judgeloop` is a link here or holds one, so a plain folder
    costs a look at its few entries."""
    if not _links_here(root / LOCAL_STATE):
        return
    found = committed_local_state(root)
    if found is not None and found[0]:
        raise RefusedLocalState(found[1])


def _links_here(folder: Path) -> bool:
    if folder.is_symlink():
        return True
    try:
        with os.scandir(folder) as entries:
            return any(entry.is_symlink() for entry in entries)
    except OSError:  # none, or not a folder
        return False


def say_committed(root: Path) -> None:
    """What git tracks at `.judgeloop`, said on stderr (status, check), if anything."""
    from pipeline.llm.terminal import echo

    found = committed_local_state(root)
    if found is not None:
        echo(f"judgeloop: {found[1]}", err=True)
