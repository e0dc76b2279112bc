"""`.judgeloop`, the local state, committed to git (`git add -f`, review11): committed as a link, it
would send every clone's cache and memos where whoever committed it chose, so `judgeloop repro` and
`judgeloop exp` refuse to run and `status` and `check` say so, each naming the fix (`git rm -r
--cached .judgeloop`, which keeps the working copy); files committed under a plain folder are said,
not refused (pipeline.tools.local_state)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.tools.dvc_run import exp, repro
from pipeline.tools.local_state import FIX, committed_local_state, refuse_committed_link, say_committed


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / ".gitignore").write_text(".judgeloop\n")
    (repo / "params.yaml").write_text("a: 1\n")
    monkeypatch.chdir(repo)
    return repo


def _commit(repo: Path, *paths: str) -> None:
    _git(repo, "add", "-f", *paths)
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "x")


def test_a_committed_local_state_link_stops_repro_and_exp_until_untracked(repo: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "else\nwhere"
    elsewhere.mkdir()
    (repo / ".judgeloop").symlink_to(elsewhere)
    _commit(repo, ".gitignore", "params.yaml", ".judgeloop")
    for command, args in ((repro, ["--replay"]), (exp, ["-S", "a=2"])):
        result = CliRunner().invoke(command, args)
        assert result.exit_code == 1, result.output
        assert "a symbolic link committed to git" in result.output
        assert f"Fix: {FIX}" in result.output
        assert "else\\nwhere" in result.output  # the target on one line
    assert os.listdir(elsewhere) == []
    subprocess.run(["sh", "-c", FIX], cwd=repo, check=True, capture_output=True)  # the fix, as written
    assert (repo / ".judgeloop").is_symlink()  # kept
    assert committed_local_state(repo) is None
    refuse_committed_link(repo)


def test_files_committed_under_the_local_state_are_said_not_refused(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / ".judgeloop" / "batch" / "export").mkdir(parents=True)
    (repo / ".judgeloop" / "batch" / "export" / "requests.jsonl").write_text("{}\n")
    _commit(repo, ".judgeloop")
    refuse_committed_link(repo)  # nothing redirected: no refusal
    say_committed(repo)
    said = capsys.readouterr().err
    assert "1 file(s) under .judgeloop/ are committed to git (.judgeloop/batch/export/requests.jsonl)" in said
    assert f"Fix: {FIX}" in said


def test_an_ignored_local_state_link_is_the_user_s_own(repo: Path, tmp_path: Path) -> None:
    (repo / ".judgeloop").symlink_to(tmp_path)
    _commit(repo, ".gitignore")
    assert committed_local_state(repo) is None
    refuse_committed_link(repo)
    assert committed_local_state(tmp_path) is None  # no repository there: nothing to say


def test_status_and_check_say_a_committed_local_state_first(repo: Path, tmp_path: Path) -> None:
    from pipeline.tools.check import check
    from pipeline.tools.status.command import status

    (repo / ".judgeloop").symlink_to(tmp_path)
    _commit(repo, ".gitignore", "params.yaml", ".judgeloop")
    for command in (status, check):
        result = CliRunner().invoke(command, [])  # (this params.yaml is no experiment: they fail after)
        said = result.output
        assert f".judgeloop is a symbolic link committed to git (to {tmp_path})" in said, said
        assert f"Fix: {FIX}" in said


@pytest.mark.parametrize("inside", ["cache", "runs", "snapshots"])
def test_a_link_committed_inside_a_plain_local_state_folder_stops_repro_and_exp(
    repo: Path, tmp_path: Path, inside: str
) -> None:
    """review16: `.judgeloop/cache` (or `runs`, `snapshots`) committed as a link, in a plain folder,
    redirects the cache, the run summaries or the snapshots as a committed `.judgeloop` link does:
    refused the same way, not only said."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (repo / ".judgeloop").mkdir()
    (repo / ".judgeloop" / inside).symlink_to(elsewhere)
    _commit(repo, ".gitignore", "params.yaml", ".judgeloop")
    for command, args in ((repro, ["--replay"]), (exp, ["-S", "a=2"])):
        result = CliRunner().invoke(command, args)
        assert result.exit_code == 1, result.output
        assert f".judgeloop/{inside} is a symbolic link committed to git (to {elsewhere})" in result.output
        assert f"Fix: {FIX}" in result.output
    assert os.listdir(elsewhere) == []
    subprocess.run(["sh", "-c", FIX], cwd=repo, check=True, capture_output=True)
    refuse_committed_link(repo)  # the user's own from then on
