"""Messages that name a path or a link's target (pipeline.llm.files.named, in_command): on one line,
a newline or a terminal's escape in the name shown as its escape (a link's target is anyone's text:
`ln -s $'x\\n\\x1b[2J' a`), and every suggested command runs as written for a name starting with
`-` (`--` before the paths), in sh."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pipeline.errors import UnsafeNameError
from pipeline.llm.files import folder_replaced_by_copy, folder_to_write, refuse_links, replaced_by_copy
from pipeline.llm.hard_links import refuse_hard_link

ODD = "el\nse\x1b[2J"  # a newline, and a terminal's escape that clears the screen


def _one_line(message: str) -> None:
    assert "\n" not in message and "\x1b" not in message, message
    assert "el\\nse\\x1b[2J" in message, message


def test_a_link_s_target_is_named_on_one_line_in_the_refusal(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    folder.mkdir()
    (folder / "shard").symlink_to(tmp_path / ODD)
    with pytest.raises(UnsafeNameError) as refused:
        refuse_links(folder, "the cache folder", "")
    _one_line(str(refused.value))


def test_a_folder_leading_out_of_the_project_is_named_on_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / ODD
    project.mkdir()
    elsewhere.mkdir()
    (project / "outputs").symlink_to(elsewhere)
    monkeypatch.chdir(project)
    with pytest.raises(UnsafeNameError) as refused:
        folder_to_write(Path("outputs"), Path("outputs/x.json"))
    _one_line(str(refused.value))


def test_a_hard_link_s_name_is_shown_on_one_line(tmp_path: Path) -> None:
    path = tmp_path / ODD
    path.write_text("x")
    os.link(path, tmp_path / "other")
    with pytest.raises(UnsafeNameError) as refused:
        refuse_hard_link(path, os.lstat(path), "the cache's database")
    _one_line(str(refused.value))


def test_a_file_link_s_fix_runs_in_sh_for_a_name_starting_with_a_dash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "elsewhere"
    target.write_text("kept\n")
    (tmp_path / "-data.yaml").symlink_to(target)
    subprocess.run(["sh", "-c", replaced_by_copy("-data.yaml")], cwd=tmp_path, check=True)
    assert not (tmp_path / "-data.yaml").is_symlink()
    assert (tmp_path / "-data.yaml").read_text() == "kept\n"
    assert target.read_text() == "kept\n"


def test_a_folder_link_s_fix_runs_in_sh_for_a_name_starting_with_a_dash(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "a.txt").write_text("kept\n")
    (tmp_path / "-data").symlink_to(target)
    subprocess.run(["sh", "-c", folder_replaced_by_copy("-data", str(target))], cwd=tmp_path, check=True)
    assert not (tmp_path / "-data").is_symlink()
    assert (tmp_path / "-data" / "a.txt").read_text() == "kept\n"
    assert (target / "a.txt").read_text() == "kept\n"


def test_a_link_refusal_s_rm_runs_in_sh_for_a_name_starting_with_a_dash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    folder = Path("-cache")
    folder.mkdir()
    (folder / "-shard").symlink_to(tmp_path)
    with pytest.raises(UnsafeNameError) as refused:
        refuse_links(folder, "the cache folder", "")
    command = str(refused.value).split("(rm ", 1)[1].split(")", 1)[0]
    subprocess.run(["sh", "-c", f"rm {command}"], cwd=tmp_path, check=True)
    assert os.listdir(folder) == []


@pytest.mark.parametrize("name", ["data\\test.csv", "C:\\new\\x41", "a\\u202eb"])
def test_a_fix_names_a_backslash_s_file_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """review16: a backslash before a letter that reads as an escape (`\\t`, `\\n`, `\\x41`: a Windows
    zip's `data\\test.csv`, unpacked here) is shown doubled in a message, so that it never reads as
    the escape; in a suggested command, a name with nothing to show as an escape is quoted as it is,
    or the command names another file (`data\\\\test.csv`) and fails."""
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "elsewhere"
    target.write_text("kept\n")
    (tmp_path / name).symlink_to(target)
    subprocess.run(["sh", "-c", replaced_by_copy(name)], cwd=tmp_path, check=True, capture_output=True)
    assert not (tmp_path / name).is_symlink()
    assert (tmp_path / name).read_text() == "kept\n"


def test_a_recording_s_fix_quotes_its_folder(tmp_path: Path) -> None:
    """review16: `git checkout -- {folder}` was written unquoted, so a folder with a space (`my
    runs/judge`) gave a command naming two paths; it is quoted, and runs as written."""
    from pipeline.errors import CorruptRecordError
    from pipeline.llm.recordings.shards import manifest_entries

    folder = Path("my runs") / "judge"
    with pytest.raises(CorruptRecordError) as refused:
        manifest_entries(folder / "calls.jsonl", "not a manifest\n")
    assert "(git checkout -- 'my runs/judge')" in str(refused.value), str(refused.value)
