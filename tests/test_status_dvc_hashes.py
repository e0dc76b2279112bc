"""`judgeloop status` asks DVC for each folder's hash once, however many stages name it
(pipeline.tools.status.dvc_hashes), and DVC still finds every stage a change touches."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.tools.status.dvc_state import dvc_view

pytestmark = pytest.mark.skipif(importlib.util.find_spec("dvc") is None, reason="needs DVC")

# Three stages read one folder of an item a subfolder (the paper's transcripts); the last writes a
# folder of pages; each stage's out is the next one's dep.
DVC_YAML = """\
stages:
  first:
    cmd: {python} -c "open('first.txt', 'w').write('1')"
    deps: [data]
    outs: [{{first.txt: {{cache: false, persist: true}}}}]
  second:
    cmd: {python} -c "open('second.txt', 'w').write('2')"
    deps: [data, first.txt]
    outs: [{{second.txt: {{cache: false, persist: true}}}}]
  third:
    cmd: {python} -c "open('third.txt', 'w').write('3')"
    deps: [data, second.txt]
    outs: [{{third.txt: {{cache: false, persist: true}}}}]
  pages:
    cmd: {python} -c "import os; os.makedirs('pages', exist_ok=True); open('pages/a.html', 'w').write('a')"
    deps: [third.txt]
    outs: [{{pages: {{cache: false, persist: true}}}}]
"""


def dvc(*args: str) -> None:
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    subprocess.run([sys.executable, "-m", "dvc", *args], check=True, env=env, capture_output=True)


def items_project(root: Path, monkeypatch: pytest.MonkeyPatch, items: int, *, git: bool) -> Path:
    """A DVC project of `items` interview folders and DVC_YAML's stages, run once (with git or not)."""
    monkeypatch.chdir(root)
    monkeypatch.setenv("DVC_NO_ANALYTICS", "1")
    for item in range(items):
        folder = root / "data" / f"{item}_P"
        folder.mkdir(parents=True)
        (folder / f"{item}_TRANSCRIPT.csv").write_text(f"turn of {item}\n")
    Path("dvc.yaml").write_text(DVC_YAML.format(python=sys.executable))
    if git:
        subprocess.run(["git", "init", "-q"], check=True)
    dvc("init", "-q", *(() if git else ("--no-scm",)))
    dvc("repro", "-q")
    return root


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return items_project(tmp_path, monkeypatch, 5, git=False)


def builds_of(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every tree or file DVC's hashing builds, by path."""
    from dvc import output

    built: list[str] = []
    original = output.Output._build

    def counted(self: output.Output, *args: object, **kwargs: object) -> object:
        built.append(Path(str(args[1])).name)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(output.Output, "_build", counted)
    return built


def answers_of(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every folder hash given without DVC's walk (pipeline.tools.status.tree_hash), by path."""
    from pipeline.tools.status import dvc_hashes, tree_hash

    answered: list[str] = []
    original = tree_hash.folder_hash_meta

    def counted(output: object) -> object:
        found = original(output)
        if found is not None:
            answered.append(Path(str(output.fs_path)).name)  # type: ignore[attr-defined]
        return found

    monkeypatch.setattr(dvc_hashes, "folder_hash_meta", counted)
    return answered


def test_a_folder_three_stages_read_is_walked_once(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built = builds_of(monkeypatch)
    answered = answers_of(monkeypatch)
    view = dvc_view()
    assert view.changed == {}
    assert built.count("data") + answered.count("data") == 1
    # An out that the next stage reads is hashed once too.
    assert built.count("first.txt") == built.count("second.txt") == built.count("third.txt") == 1


def test_a_changed_item_still_makes_every_stage_that_reads_it_run(project: Path) -> None:
    (project / "data" / "3_P" / "3_TRANSCRIPT.csv").write_text("turn of 3, changed\n")
    view = dvc_view()
    assert view.changed is not None
    assert sorted(view.changed) == ["first", "second", "third"]
    assert all("data" in why for why in view.changed.values())


def test_a_changed_out_is_seen_by_its_own_stage_and_the_next(project: Path) -> None:
    (project / "second.txt").write_text("edited by hand")
    view = dvc_view()
    assert view.changed is not None
    assert sorted(view.changed) == ["second", "third"]
    assert "changed outs" in view.changed["second"] and "changed deps" in view.changed["third"]


def test_dvc_hashes_as_before_once_status_is_done(project: Path) -> None:
    from dvc import output

    before = output.Output._get_hash_meta
    dvc_view()
    assert output.Output._get_hash_meta is before


# --- the stages read from dvc.yaml alone where git lists no other stage file (dvc_files) ----------


@pytest.fixture
def git_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return items_project(tmp_path, monkeypatch, 3, git=True)


def no_workspace_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    from dvc.repo import index

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("DVC walked the workspace for stage files")

    monkeypatch.setattr(index, "collect_files", refused)


def test_with_git_and_one_dvc_yaml_no_walk_collects_the_stages(
    git_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_workspace_walk(monkeypatch)
    view = dvc_view()
    assert view.changed == {}
    assert view.upstream == {"first": (), "second": ("first",), "third": ("second",), "pages": ("third",)}
    (git_project / "data" / "1_P" / "1_TRANSCRIPT.csv").write_text("turn of 1, changed\n")
    assert sorted(dvc_view().changed or {}) == ["first", "second", "third"]


@pytest.mark.parametrize("where", ["sub/dvc.yaml", "extra.dvc"])
def test_another_stage_file_is_collected_as_dvc_does(git_project: Path, where: str) -> None:
    """A stage file beside the project's dvc.yaml: DVC's own collection, so its stage is seen."""
    if where.endswith(".dvc"):
        Path("extra.txt").write_text("tracked by a .dvc file")
        dvc("add", "-q", "extra.txt")
        Path("extra.txt").write_text("changed since")
        assert "extra.txt.dvc" in (dvc_view().changed or {})
        return
    Path("sub").mkdir()
    Path(where).write_text(f'stages:\n  other:\n    cmd: {sys.executable} -c "pass"\n    deps: [../data]\n')
    view = dvc_view()
    assert "other" in (view.changed or {}) and "sub/dvc.yaml:other" in view.upstream


def test_a_project_without_git_is_collected_as_dvc_does(project: Path) -> None:
    assert sorted(dvc_view().upstream) == ["first", "pages", "second", "third"]
