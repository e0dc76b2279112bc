"""A pull request's DVC files against the reading of recordings DVC checked out as links (review11).

pipeline.llm.recordings.dvc_links reads a committed `.dvc/config` (through DVC's Config) as soon as a
recording's folder holds a link: a config that is a link to a pipe or a device, or that DVC's parsers
choke on, must refuse the link as before, never hang or raise another exception's traceback.
`judgeloop status` names any link DVC cannot read through (a loop, one leading out of the project),
not only one into DVC's cache whose file is gone, and says where it leads. `judgeloop check` turns
into files only the recordings' links into DVC's cache: a data folder's links stay links, as the
project reads them (and a dataset DVC tracks is not copied whole).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.errors import UnsafeNameError
from pipeline.llm.recordings import dvc_links, stage_folders, stage_reader, stage_writer
from pipeline.tools import check
from pipeline.tools.status.dvc_state import dvc_view
from tests.test_recordings_dvc_links import CALLS, _added, _calls, _dvc_project
from tests.test_recordings_remote import _dvc, _run

ROOT = Path(__file__).resolve().parents[1]


def _linked_recording(project: Path) -> Path:
    """A stage folder of `project` whose recording is a link (to a regular file in the project)."""
    directory = project / "recordings" / "judge"
    stage_writer.write_stage(directory, _calls(2))
    moved = project / "moved.jsonl"
    (directory / CALLS).rename(moved)
    (directory / CALLS).symlink_to(moved)
    return directory


@pytest.mark.parametrize("config", ["pipe", "device"])
def test_a_dvc_config_that_is_a_pipe_or_a_device_is_never_read(tmp_path: Path, config: str) -> None:
    project = tmp_path / "project"
    (project / ".dvc").mkdir(parents=True)
    if config == "pipe":
        os.mkfifo(project / ".dvc" / "config")  # no writer: a read waits for good
    else:
        (project / ".dvc" / "config").symlink_to("/dev/zero")  # a link is what git holds
    directory = _linked_recording(project)
    # In a process of its own, its memory bounded: the merged code waited on the pipe, or read
    # /dev/zero until the memory ran out (MemoryError).
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
        "from pathlib import Path\n"
        "from pipeline.errors import UnsafeNameError\n"
        "from pipeline.llm.recordings import stage_folders\n"
        "try:\n"
        "    stage_folders.refuse_linked(Path(sys.argv[1]))\n"
        "except UnsafeNameError as exc:\n"
        "    print('refused:', exc)\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, str(directory)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("reading .dvc/config waited on it for good")
    assert done.returncode == 0, done.stderr
    assert "refused:" in done.stdout and "calls.jsonl: a symbolic link" in done.stdout, done.stdout


@pytest.mark.parametrize(
    "text",
    [
        "[cache]\n    dir = a, b\n",  # a list to DVC's config reader: TypeError in its schema
        "cache = 1\n",  # a section given as a value: voluptuous' MultipleInvalid
        "[cache]\n    dir = %(x)s\n",  # configobj's interpolation: MissingInterpolationOption
    ],
)
def test_a_dvc_config_dvc_cannot_read_refuses_the_link_without_a_traceback(tmp_path: Path, text: str) -> None:
    project = tmp_path / "project"
    (project / ".dvc").mkdir(parents=True)
    (project / ".dvc" / "config").write_text(text, encoding="utf-8")
    directory = _linked_recording(project)
    assert dvc_links.cache_file(directory / CALLS) is None
    with pytest.raises(UnsafeNameError, match=r"calls\.jsonl: a symbolic link"):
        stage_folders.refuse_linked(directory)
    with pytest.raises(UnsafeNameError, match=r"calls\.jsonl: a symbolic link"):
        list(stage_reader.read_stage(directory))


def test_status_says_where_a_link_dvc_cannot_read_through_leads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    _run(["git", "init", "-q"], project)
    _dvc(project, "init", "-q")
    _dvc(project, "config", "cache.type", "symlink")
    directory = project / "recordings" / "judge"
    stage_writer.write_stage(directory, _calls(2))
    (project / "dvc.yaml").write_text(
        "stages:\n  judge:\n    cmd: 'true'\n    outs:\n    - recordings/judge\n"
    )
    _dvc(project, "commit", "-f", "-q", "judge")
    link = directory / CALLS
    monkeypatch.chdir(project)

    gone = project / ".dvc" / "cache" / "files" / "md5" / "00" / ("0" * 30)  # named as an object
    link.unlink()
    link.symlink_to(gone)  # into DVC's cache, its file gone (`dvc gc`): said as before
    how = dvc_view().how
    assert f"{link}: a link whose file is gone (DVC's cache no longer holds it" in how, how

    link.unlink()
    link.symlink_to(CALLS)  # a loop: the merged code's status printed OSError's traceback
    how = dvc_view().how
    assert f"{link}: a link to calls.jsonl, which leads to no file" in how, how
    assert "Fix: put the file itself in its place" in how

    link.unlink()
    link.symlink_to(tmp_path / "nowhere")  # out of the project: not DVC's cache that lost it
    how = dvc_view().how
    assert f"a link to {tmp_path / 'nowhere'}, which leads to no file" in how, how
    assert "DVC's cache no longer holds it" not in how


def test_check_copies_the_recordings_cache_links_as_files_and_leaves_a_data_folder_s_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = _dvc_project(tmp_path / "project", "symlink")
    _added(project, _calls(3))
    interviews = project / "data" / "interviews"
    interviews.mkdir(parents=True)
    (interviews / "a.txt").write_text("an interview\n", encoding="utf-8")
    _dvc(project, "add", "-q", "data/interviews")
    assert (interviews / "a.txt").is_symlink()
    (project / "params.yaml").write_text("{}\n", encoding="utf-8")
    (project / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n", encoding="utf-8")
    locked = {"assess": check.LockedStage("assess", (), ("data/interviews",))}
    monkeypatch.chdir(project)
    into = tmp_path / "copy"
    check.workspace(Path("params.yaml"), into, locked, "recordings")
    copied = into / "recordings" / "judge" / CALLS
    assert (
        not copied.is_symlink()
        and copied.read_bytes() == (project / "recordings" / "judge" / CALLS).read_bytes()
    )
    # The data folder as the project has it: a link (the interviews' reader judges it there as here),
    # not a copy of what DVC tracks (the merged code copied every such file whole).
    assert (into / "data" / "interviews" / "a.txt").is_symlink()


def test_a_local_state_folder_linked_to_another_disk_is_ignored_by_git(tmp_path: Path) -> None:
    # `.judgeloop/` matched only a folder: the link a user makes to put the local state on another
    # disk was not ignored, so `git add -A` committed it, and a clone then wrote its local state
    # (and, by name, `diff --html .judgeloop/...`) wherever that link leads.
    _run(["git", "init", "-q"], tmp_path)
    (tmp_path / ".gitignore").write_bytes((ROOT / ".gitignore").read_bytes())
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / ".judgeloop").symlink_to(tmp_path / "elsewhere")
    said = _run(["git", "check-ignore", "-q", ".judgeloop"], tmp_path, check=False)
    assert said.returncode == 0, "a .judgeloop link is not ignored by git"


def test_status_does_not_ask_dvc_when_its_config_is_a_pipe(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".dvc").mkdir(parents=True)
    os.mkfifo(project / ".dvc" / "config")  # DVC's own reading of it waited for good
    code = "from pipeline.tools.status.dvc_state import dvc_view\nprint(dvc_view().how)\n"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=project, env=env, capture_output=True, text=True, timeout=120
        )
    except subprocess.TimeoutExpired:
        pytest.fail("judgeloop status waited on .dvc/config for good")
    assert done.returncode == 0, done.stderr
    assert "dvc status not asked: .dvc/config: not a regular file" in done.stdout, done.stdout


@pytest.mark.parametrize("where", ["the project's root", "outside the project"])
def test_a_dvc_folder_committed_below_the_project_s_root_names_no_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """A committed recordings/.dvc (a subrepo's, to DVC, which leaves it out of the project run from
    its root) is never the .dvc whose config names the cache a recording's link must lead into: not
    one whose `cache.dir` names a folder of the pull request's, nor an empty one that would refuse
    the project's own links (mend-close; review11 left it). Read from the project's root, as every
    command runs, and from outside the project (its outermost .dvc)."""
    project = _dvc_project(tmp_path / "project", "symlink")
    directory = _added(project, _calls(3))
    theirs = project / "recordings" / ".dvc"
    theirs.mkdir()
    monkeypatch.chdir(project if where == "the project's root" else tmp_path)
    assert dvc_links.cache_file(directory / CALLS) is not None  # the project's cache, as DVC's
    assert len(list(stage_reader.read_stage(directory))) == 3

    planted = project / "recordings" / "planted"  # a cache of the pull request's, an object in it
    target = os.path.realpath(directory / CALLS)
    obj = planted / "files" / "md5" / target[-33:-31] / target[-30:]
    obj.parent.mkdir(parents=True)
    obj.write_bytes(Path(target).read_bytes())
    (theirs / "config").write_text(f"[cache]\n    dir = {planted}\n")
    (directory / CALLS).unlink()
    (directory / CALLS).symlink_to(obj)
    assert dvc_links.cache_file(directory / CALLS) is None
    with pytest.raises(UnsafeNameError, match=r"calls\.jsonl: a symbolic link"):
        list(stage_reader.read_stage(directory))
