"""The local state (.judgeloop: the cache, its memos and the runs' summaries) may lie anywhere, as
README says of `cache.dir`: a `.judgeloop` (or a JUDGELOOP_CACHE_DIR's folder) that is a link to
another disk is the user's own choice, never an output or a recording. The outputs' rule (a folder
linked out of the project is refused: pipeline.llm.files.folder_to_write) does not apply to it; it
did to the runs' summaries, written beside the cache at every LLM stage's close, so that every
LLM stage failed there after its work."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.project import recorded_project


def test_a_judgeloop_folder_linked_to_another_disk_keeps_working(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "disk").mkdir()
    (tmp_path / "project" / ".judgeloop").symlink_to(tmp_path / "disk", target_is_directory=True)
    monkeypatch.chdir(tmp_path / "project")
    recorded_project(Path("."), items=("901",))
    assert sorted(p.name for p in (tmp_path / "disk" / "runs").iterdir()) == [
        "assess.json",
        "judge.json",
        "refine.json",
    ]
    assert (tmp_path / "project" / "recordings" / "judge").is_dir()
