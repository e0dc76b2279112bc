"""The local state (.judgeloop: the cache, its memos and the runs' summaries) may lie anywhere, as
README says of `cache.dir`: a `.judgeloop` (or a JUDGELOOP_CACHE_DIR's folder) that is a link to
another disk is the user's own choice, never an output or a recording. The outputs' rule (a folder
linked out of the project is refused: pipeline.llm.files.folder_to_write) does not apply to it; it
did to the runs' summaries, written beside the cache at every LLM stage's close, so that every
LLM stage failed there after its work.

Nor does it apply to what judgeloop writes there by default (the batch export's folder) or where a
user names a folder in it (`judgeloop diff --html .judgeloop/diff`, as README shows): the rule is
one, by name, in folder_to_write. Every other folder stays held to it, and params cannot name an
output under .judgeloop."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from pipeline.errors import UnsafeNameError
from pipeline.judges.rubric.settings import AssessSettings
from pipeline.llm.files import replacing
from pipeline.llm.settings import EngineSettings
from pipeline.tools.batch.exchange import DEFAULT_FOLDER
from pipeline.tools.diff.page import write_page
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


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project, the working folder, whose .judgeloop is a link to a folder on "another disk"."""
    (tmp_path / "project").mkdir()
    (tmp_path / "disk").mkdir()
    (tmp_path / "project" / ".judgeloop").symlink_to(tmp_path / "disk")
    monkeypatch.chdir(tmp_path / "project")
    return tmp_path / "project"


def test_a_diff_page_named_in_the_linked_local_state_is_written_there(project: Path) -> None:
    page = write_page(Path(".judgeloop/diff"), ["a", "b"], [], [], ({}, {}))
    assert page == Path(".judgeloop/diff/index.html")
    assert (project.parent / "disk" / "diff" / "index.html").read_text(encoding="utf-8").startswith("<!")


def test_the_batch_export_s_default_folder_is_written_in_the_linked_local_state(project: Path) -> None:
    assert DEFAULT_FOLDER.parts[0] == ".judgeloop"
    with replacing(DEFAULT_FOLDER / "requests.jsonl") as out:
        out.write(b'{"custom_id":"a"}\n')
    assert (project.parent / "disk" / "batch" / "export" / "requests.jsonl").is_file()


@pytest.mark.parametrize("linked", ["outputs", ".judgeloop-old", "outputs/.judgeloop"])
def test_any_other_folder_linked_out_is_still_refused(project: Path, linked: str) -> None:
    """Only the project's own .judgeloop, by name: not a name that begins like it, nor one lower down."""
    Path(linked).parent.mkdir(parents=True, exist_ok=True)
    Path(linked).symlink_to(project.parent / "disk")
    with pytest.raises(UnsafeNameError, match=r"not written: .* is a symbolic link"):
        write_page(Path(linked) / "diff", ["a", "b"], [], [], ({}, {}))
    assert not (project.parent / "disk" / "diff").exists()


@pytest.mark.parametrize("out", [".judgeloop/assessments.jsonl", "./.judgeloop/x.jsonl", "a/../.judgeloop/x"])
def test_params_cannot_name_an_output_in_the_local_state(out: str) -> None:
    with pytest.raises(ValidationError, match=r"judgeloop's local state"):
        AssessSettings.model_validate({"out": out})
    with pytest.raises(ValidationError, match=r"judgeloop's local state"):
        EngineSettings.model_validate({"cache": {"recordings": out}})
    AssessSettings.model_validate({"out": ".judgeloop-outputs/assessments.jsonl"})  # another name
