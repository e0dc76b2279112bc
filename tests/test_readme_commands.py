"""Every command in README.md's ```sh blocks works as written: in a fresh clone, in a fresh shell
with nothing activated (a bare environment whose PATH lacks any virtual environment), in order.

A command that needs what a test machine cannot have says so in the README with `needs: …` in its
comment (an Ollama server, a collaborator's clone, the whole test suite): it is skipped, and the
reason is reported. The clone is of this checkout's HEAD plus its uncommitted changes to tracked
files, so the test checks what would be committed.

After every command the clone's `git status` is clean: a README command may write only what git
ignores (.venv, .judgeloop) or what it rewrites byte for byte (the committed outputs, recordings
and dvc.lock; `make replay` among them, with byte-code written as a bare environment does).

The clone reuses the virtual environment this test runs in, as its .venv (a symbolic link): a fresh
install would compile llama-cpp-python for minutes. That environment must have been made by
`make install` (it has the stamp file the Makefile checks); the clone's pyproject.toml gets the
stamp's age, so make sees an installed environment and does not reinstall into the shared one. The
commands run `python -m pipeline.tools.cli` and the stages from the clone's own files (Makefile), so they
test the clone's code even though the environment was installed from another checkout.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow

FRESH_PATH = "/usr/local/bin:/usr/bin:/bin"
NEEDS = re.compile(r"\bneeds:\s*(.+?)\)?\s*$")


def readme_commands(readme: str) -> list[tuple[int, str]]:
    """(line number, command) of every command in the README's ```sh blocks, in order."""
    commands, block = [], False
    for number, line in enumerate(readme.splitlines(), start=1):
        if line.startswith("```"):
            block = line.strip() == "```sh" if not block else False
            continue
        if block and line.strip() and not line.lstrip().startswith("#"):
            commands.append((number, line.strip()))
    return commands


def test_the_readme_has_commands_and_marks_what_it_cannot_run_here() -> None:
    commands = readme_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(commands) >= 8
    reasons = [match.group(1).strip() for _, c in commands if (match := NEEDS.search(c))]
    # Named: a skip must say what the command needs; and most commands must run here.
    assert 0 < len(reasons) < len(commands) / 2 and all(reasons)
    assert any(c.startswith("make replay") for _, c in commands)


def _venv() -> Path:
    prefix = Path(sys.prefix)
    if prefix == Path(sys.base_prefix) or not (prefix / ".installed-stamp").exists():
        pytest.skip(f"runs under a virtual environment made by `make install` (this is {prefix})")
    return prefix


def _clone(tmp: Path, venv: Path) -> Path:
    clone = tmp / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    diff = subprocess.run(
        ["git", "diff", "HEAD", "--binary"], cwd=ROOT, check=True, capture_output=True
    ).stdout
    if diff:  # committed in the clone, so that its `git status` starts clean
        subprocess.run(["git", "apply", "--whitespace=nowarn"], cwd=clone, input=diff, check=True)
        who = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
        subprocess.run(["git", *who, "commit", "-qam", "uncommitted changes"], cwd=clone, check=True)
    (clone / ".venv").symlink_to(venv, target_is_directory=True)
    with (clone / ".git" / "info" / "exclude").open("a") as exclude:
        exclude.write("/.venv\n")  # .gitignore's `.venv/` matches a folder, and this is a link to one
    stamp = (venv / ".installed-stamp").stat().st_mtime
    # Everything the Makefile's install stamp depends on, older than the stamp: the clone uses the
    # environment as installed, and make would otherwise install again (compiling llama-cpp-python
    # anew under the fresh shell's empty HOME).
    for installed_from in ("pyproject.toml", "requirements/lock.txt", "pipeline/llm/llama_pin.py"):
        os.utime(clone / installed_from, (stamp - 1, stamp - 1))
    return clone


def test_every_readme_command_runs_in_a_fresh_clone_and_shell(tmp_path: Path) -> None:
    for tool in ("git", "make", "bash"):
        if shutil.which(tool, path=FRESH_PATH) is None:
            pytest.skip(f"needs {tool} on {FRESH_PATH}")
    clone = _clone(tmp_path, _venv())
    home = tmp_path / "home"
    home.mkdir()
    # What `env -i` leaves a new login: no VIRTUAL_ENV, no PYTHONPATH, no JUDGELOOP_*, no .venv/bin.
    fresh = {"HOME": str(home), "PATH": FRESH_PATH, "LANG": "C.UTF-8", "TERM": "dumb"}
    skipped, ran = [], 0
    for number, command in readme_commands((clone / "README.md").read_text(encoding="utf-8")):
        needs = NEEDS.search(command)
        if needs:
            skipped.append(f"README.md:{number}: {command.split('#')[0].strip()} (needs {needs.group(1)})")
            continue
        result = subprocess.run(
            ["bash", "-c", command], cwd=clone, env=fresh, capture_output=True, text=True, timeout=600
        )
        assert result.returncode == 0, (
            f"README.md:{number}: `{command}` failed with {result.returncode} in a fresh shell\n"
            f"--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-3000:]}"
        )
        status = subprocess.run(
            ["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True
        ).stdout
        assert status == "", f"README.md:{number}: `{command}` left `git status` unclean:\n{status}"
        ran += 1
    print(f"ran {ran} README commands; skipped {len(skipped)}:", *skipped, sep="\n  ")
    assert ran >= 8
