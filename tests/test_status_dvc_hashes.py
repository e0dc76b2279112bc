"""`judgeloop status` asks DVC for each folder's hash once, however many stages name it
(pipeline.tools.status.dvc_hashes), and DVC still finds every stage a change touches."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.tools.status.command import dvc_view

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


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DVC_NO_ANALYTICS", "1")
    for item in range(5):
        folder = tmp_path / "data" / f"{item}_P"
        folder.mkdir(parents=True)
        (folder / f"{item}_TRANSCRIPT.csv").write_text(f"turn of {item}\n")
    Path("dvc.yaml").write_text(DVC_YAML.format(python=sys.executable))
    dvc("init", "--no-scm", "-q")
    dvc("repro", "-q")
    return tmp_path


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


def test_a_folder_three_stages_read_is_walked_once(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built = builds_of(monkeypatch)
    view = dvc_view()
    assert view.changed == {}
    assert built.count("data") == 1
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
