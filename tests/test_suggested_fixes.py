"""The fixes that judgeloop's link refusals suggest can be run as written, on any POSIX shell (GNU
cp's --remove-destination is not on macOS or BSD), keep the file the link led to, and name the link
that is the fault: the file itself, or a folder above it."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from pipeline.errors import ConfigError, UnsafeNameError
from pipeline.llm import files
from pipeline.llm.project_files import link_out
from pipeline.tools import code_digests

SECRET = "[default]\nkey = AKIAIOSFODNN7EXAMPLE\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "project").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "params.yaml").write_text(SECRET, encoding="utf-8")
    monkeypatch.chdir(tmp_path / "project")
    return tmp_path / "project"


def _command(message: str) -> str:
    found = re.search(r"\((cp -p [^()]*)\)", message)
    assert found, message
    return found[1]


def test_the_fix_for_a_config_file_linked_out_runs_in_sh_and_keeps_the_file(project: Path) -> None:
    elsewhere = project.parent / "elsewhere" / "params.yaml"
    (project / "params.yaml").symlink_to(elsewhere)
    message = link_out(Path("params.yaml"))
    assert message is not None and "--remove-destination" not in message and "realpath" not in message
    subprocess.run(["sh", "-c", _command(message)], cwd=project, check=True)
    assert not (project / "params.yaml").is_symlink()
    assert (project / "params.yaml").read_text(encoding="utf-8") == SECRET
    assert elsewhere.read_text(encoding="utf-8") == SECRET  # the file it led to, kept
    assert link_out(Path("params.yaml")) is None


def test_a_folder_linked_out_above_a_config_file_is_named_as_the_link(project: Path) -> None:
    """`cp --remove-destination "$(realpath conf/params.yaml)" conf/params.yaml` removed the file it
    was to copy (the name, through the folder link, is that file)."""
    (project / "conf").symlink_to(project.parent / "elsewhere")
    message = link_out(Path("conf/params.yaml"))
    assert message is not None
    folder = project.parent / "elsewhere"
    assert f"Fix: make conf (a link to {folder}) a folder of the project's own" in message
    assert "cp " not in message


def test_the_code_stage_s_folder_linked_out_is_refused_with_a_fix_before_imports_json_is_read(
    project: Path,
) -> None:
    (project / "stages").mkdir()
    (project / code_digests.FOLDER).symlink_to(project.parent / "elsewhere")
    with pytest.raises(UnsafeNameError) as refused:
        code_digests.write_digests(project)
    message = str(refused.value)
    assert message.endswith(
        "Fix: remove the link (rm -- "
        f"{shlex.quote(str(project / code_digests.FOLDER))}), "
        f"then `judgeloop dvc-yaml` writes {code_digests.IMPORTS} "
        "again in a folder of the project's own."
    ), message


def test_stages_linked_out_is_refused_before_imports_json_is_read_and_its_fix_runs_in_sh(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`stages -> /elsewhere` (a folder above stages/code, which refuse_links of stages/code alone
    does not see): imports.json there is never read, since it would name the files hashed."""
    elsewhere = project.parent / "elsewhere" / "stages"
    (elsewhere / "code").mkdir(parents=True)
    (elsewhere / "code" / "imports.json").write_text('{"stages": {}}\n', encoding="utf-8")
    (project / "stages").symlink_to(elsewhere)
    read: list[str] = []
    reader = files.read_regular

    def noted(path: Path, limit: int) -> bytes:
        read.append(str(path))
        return reader(path, limit)

    monkeypatch.setattr("pipeline.tools.code_digests.read_regular", noted)
    for attempt in (code_digests.write_digests, code_digests.read_imports):
        with pytest.raises(ConfigError) as refused:
            attempt(project)
        assert f"stages is a link to {elsewhere}" in str(refused.value)
    assert read == []
    assert code_digests.pending(project) == {}
    fix = re.search(r"\((cp -pR [^()]*)\)", str(refused.value))
    assert fix, refused.value
    subprocess.run(["sh", "-c", fix[1]], cwd=project, check=True)
    assert not (project / "stages").is_symlink()
    assert (project / "stages" / "code" / "imports.json").is_file()
    assert (elsewhere / "code" / "imports.json").is_file()
    assert code_digests.read_imports(project) == {}
