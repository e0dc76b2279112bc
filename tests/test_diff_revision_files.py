"""A revision's run written out for `judgeloop diff` (pipeline.tools.diff.runs.run_folder): its
tracked files byte for byte, on every supported Python, and nothing that leaves the folder.

Debian 12's python3, a supported Python, is 3.11.2: `TarFile.extractall(filter=...)` came in 3.11.4,
and `judgeloop diff HEAD workspace` failed there with a TypeError. The first test runs under a
tarfile that lacks the argument, as 3.11.2's does.
"""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

from pipeline.errors import JudgeloopError
from pipeline.tools.diff.runs import run_folder

FILES = {
    "params.yaml": b"llm:\n  model: x\n",
    "outputs/paper/scores.csv": b"item,score\n1,4\n",
    "recordings/judge/calls.jsonl": '{"a": "\u00e9"}\n'.encode(),
    "data/never.txt": b"not a run's file\n",
}


def _commit(repo: Path, files: dict[str, bytes], links: dict[str, str]) -> str:
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for name, content in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_bytes(content)
    for name, target in links.items():
        os.symlink(target, repo / name)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "run"], check=True)
    return subprocess.run(
        [*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


def _without_the_filter_argument(monkeypatch: pytest.MonkeyPatch) -> None:
    original = tarfile.TarFile.extractall

    def extractall(self: tarfile.TarFile, *args: Any, **kwargs: Any) -> None:
        if "filter" in kwargs:  # as Python 3.11.0-3.11.3 answer it
            raise TypeError("TarFile.extractall() got an unexpected keyword argument 'filter'")
        original(self, *args, **kwargs)

    monkeypatch.setattr(tarfile.TarFile, "extractall", extractall)


def test_a_revision_s_run_is_written_byte_for_byte_where_tarfile_has_no_filter_argument(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _without_the_filter_argument(monkeypatch)
    commit = _commit(tmp_path / "repo", FILES, {"recordings/judge/latest.jsonl": "calls.jsonl"})
    with run_folder(commit, tmp_path / "repo") as folder:
        written = {
            str(path.relative_to(folder)): path for path in sorted(folder.rglob("*")) if not path.is_dir()
        }
        assert set(written) == {
            "params.yaml",
            "outputs/paper/scores.csv",
            "recordings/judge/calls.jsonl",
            "recordings/judge/latest.jsonl",
        }
        for name, path in written.items():
            if name in FILES:
                assert path.read_bytes() == FILES[name] and not path.is_symlink()
        # A link inside the run stays a link, for the recordings' readers to refuse by their own rule.
        assert os.readlink(written["recordings/judge/latest.jsonl"]) == "calls.jsonl"
    assert not folder.exists()


@pytest.mark.parametrize("target", ["../../../../etc/passwd", "/etc/passwd", "../../../params.yaml"])
def test_a_revision_holding_a_link_out_of_the_run_is_refused_naming_it(tmp_path: Path, target: str) -> None:
    commit = _commit(tmp_path / "repo", FILES, {"recordings/judge/out.jsonl": target})
    refused = pytest.raises(JudgeloopError, match=r"recordings/judge/out\.jsonl.*not a plain file")
    with refused, run_folder(commit, tmp_path / "repo"):
        pass
    assert not (tmp_path / "etc").exists()
