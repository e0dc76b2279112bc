"""The suite sees the same environment wherever it runs (tests/conftest.py): a CI runner starts it in
the background with no terminal, no SHELL and no git identity configured; a developer from a
terminal, with their own. Each check here failed under `bash -c "trap '' INT; pytest ..."` (SIGINT
ignored, as a runner's background start leaves it) or with a HOME without git's user.name."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

CHILD = (
    "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler,"
    " signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)"
)


def test_sigint_interrupts_as_from_a_terminal() -> None:
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    # Not ignored (a handler of a library's, as `ray.init()` leaves one in this process after
    # test_batch, is reset at each child's exec: the child below sees the default)
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    assert signal.SIGINT not in blocked and signal.SIGTERM not in blocked
    # a child's Python installs its handler only where it starts with SIGINT's default
    child = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True)
    assert child.stdout == "True True\n"


def test_a_commit_needs_no_configured_identity(tmp_path: Path) -> None:
    empty = tmp_path / "home"
    empty.mkdir()
    git = ["git", "-c", "user.useConfigOnly=true", "-C", str(tmp_path)]
    env = {**os.environ, "HOME": str(empty), "XDG_CONFIG_HOME": str(empty), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run([*git, "init", "-q"], check=True, env=env)
    done = subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "x"], capture_output=True, env=env)
    assert done.returncode == 0, done.stderr


def test_a_commit_needs_none_of_a_developers_git_settings(tmp_path: Path) -> None:
    """Signing asked for (here by a program that always fails) and a hook that refuses every commit,
    in the developer's own git config: the tests' commits are made all the same."""
    home = tmp_path / "home"
    (home / "hooks").mkdir(parents=True)
    (home / "hooks" / "pre-commit").write_text("#!/bin/sh\nexit 1\n")
    (home / "hooks" / "pre-commit").chmod(0o755)
    own = f"[commit]\n\tgpgSign = true\n[gpg]\n\tprogram = false\n[core]\n\thooksPath = {home / 'hooks'}\n"
    (home / ".gitconfig").write_text(own)
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home)}
    git = ["git", "-C", str(tmp_path)]
    subprocess.run([*git, "init", "-q"], check=True, env=env)
    done = subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "x"], capture_output=True, env=env)
    assert done.returncode == 0, done.stderr
