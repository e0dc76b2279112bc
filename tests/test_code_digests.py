"""Each stage depends on a digest of its code that dvc.yaml's code stage writes (issue 31): the same
information as listing every module under every stage, each module hashed once. A change to a
module reruns exactly the stages that load it, and status and the pre-flight still name it."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from pipeline.errors import ConfigError
from pipeline.tools import code_digests
from pipeline.tools.code_digests import IMPORTS, digest_path, pending, read_imports, write_digests
from tests.conftest import ROOT

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}
PAPER = "aggregate"  # the paper's last stage: code, assess, judge, refine, aggregate run for it


def _imports(root: Path, stages: dict[str, list[str]]) -> None:
    (root / IMPORTS).parent.mkdir(parents=True, exist_ok=True)
    (root / IMPORTS).write_text(code_digests.imports_text(stages), encoding="utf-8")


def test_no_stage_but_the_code_stage_lists_a_module_file() -> None:
    # Before issue 31 every stage listed each module it loads: 1,050 dep entries, most of dvc.lock.
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    listing = {
        name
        for name, spec in stages.items()
        if name != "code" and any(d.endswith(".py") for d in spec["deps"])
    }
    assert not listing, f"these stages list module files instead of their code digest: {sorted(listing)}"
    assert all(digest_path(name) in spec["deps"] for name, spec in stages.items() if name != "code")
    assert stages["code"]["cmd"] == code_digests.COMMAND


def test_the_committed_digests_are_the_code_stage_s(tmp_path: Path) -> None:
    # What `dvc repro` of a fresh clone finds: the code stage would write every digest as committed.
    assert pending(ROOT) == {}
    for stage, files in read_imports(ROOT).items():
        recorded = json.loads((ROOT / digest_path(stage)).read_text(encoding="utf-8"))
        assert recorded["stage"] == stage and sorted(recorded["files"]) == sorted(files)


def test_a_digest_is_rewritten_only_where_a_file_it_names_changed(tmp_path: Path) -> None:
    for name, text in {"a.py": "A = 1\n", "b.py": "B = 1\n"}.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    _imports(tmp_path, {"one": ["a.py"], "two": ["a.py", "b.py"], "three": ["b.py"]})
    assert write_digests(tmp_path) == ["one", "three", "two"]
    assert write_digests(tmp_path) == [] and pending(tmp_path) == {}
    before = {s: (tmp_path / digest_path(s)).stat().st_ino for s in ("one", "two", "three")}

    (tmp_path / "b.py").write_text("B = 2\n", encoding="utf-8")
    assert pending(tmp_path) == {"three": {"b.py": "modified"}, "two": {"b.py": "modified"}}
    assert write_digests(tmp_path) == ["three", "two"]
    assert (tmp_path / digest_path("one")).stat().st_ino == before["one"]  # untouched: DVC sees it unchanged

    _imports(tmp_path, {"one": ["a.py", "b.py"], "two": ["a.py", "b.py"], "three": []})  # imports moved
    assert pending(tmp_path) == {"one": {"b.py": "new"}, "three": {"b.py": "deleted"}}
    (tmp_path / "a.py").unlink()
    with pytest.raises(ConfigError, match=r"stage one loads a\.py .* which is not there"):
        write_digests(tmp_path)


@pytest.mark.parametrize("linked", ["pipeline/a.py", "pipeline"])
def test_a_module_reached_through_a_link_out_of_the_project_is_refused_not_hashed(
    tmp_path: Path, linked: str
) -> None:
    """A pull request can commit `pipeline/a.py -> /elsewhere/secret` (or a folder link above it):
    the code stage must not write that file's sha256 into a digest. A link inside the project is
    hashed as before."""
    project, outside = tmp_path / "project", tmp_path / "outside"
    (outside / "pipeline").mkdir(parents=True)
    (outside / "pipeline" / "a.py").write_text("SECRET = 1\n", encoding="utf-8")
    (project / "pipeline").mkdir(parents=True)
    (project / "b.py").write_text("B = 1\n", encoding="utf-8")
    if linked == "pipeline":
        (project / "pipeline").rmdir()
    (project / linked).symlink_to(outside / linked)
    (project / "c.py").symlink_to("b.py")  # inside: hashed
    _imports(project, {"one": ["pipeline/a.py", "c.py"], "two": ["c.py"]})
    with pytest.raises(ConfigError) as refused:
        write_digests(project)
    message = str(refused.value)
    assert message.startswith(f"pipeline/a.py (named by {IMPORTS}): {linked} is a link to {outside / linked}")
    if linked == "pipeline":
        assert "Fix: make pipeline a folder of the project's own, not a link" in message
    else:
        copied, own, link = (
            shlex.quote(str(p)) for p in (outside / linked, project / f"{linked}.own", project / linked)
        )
        assert f"(cp -p -- {copied} {own} && mv -- {own} {link})" in message  # quoted for sh
    assert not (project / digest_path("one")).exists() and pending(project) == {}
    _imports(project, {"two": ["c.py"]})
    assert write_digests(project) == ["two"]


@pytest.mark.parametrize(
    ("stages", "fault"),
    [
        ({"one": ["../outside.py"]}, "not paths inside the project"),
        ({"one": ["/etc/passwd"]}, "not paths inside the project"),
        ({"one": "a.py"}, "not paths inside the project"),
        ({"../one": ["a.py"]}, "is not a stage's name"),
        ({"imports": ["a.py"]}, "is not a stage's name"),
    ],
)
def test_imports_json_naming_a_path_outside_or_an_odd_stage_is_refused(
    tmp_path: Path, stages: dict[str, object], fault: str
) -> None:
    (tmp_path / IMPORTS).parent.mkdir(parents=True)
    (tmp_path / IMPORTS).write_text(json.dumps({"stages": stages}), encoding="utf-8")
    with pytest.raises(ConfigError, match=fault):
        write_digests(tmp_path)
    assert pending(tmp_path) == {}  # status says nothing of it; the code stage names the fault


def test_dvc_yaml_check_fails_on_a_stale_imports_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipeline.tools.dvc_yaml import dvc_yaml

    monkeypatch.chdir(ROOT)
    output = tmp_path / "dvc.yaml"
    assert CliRunner().invoke(dvc_yaml, ["--output", str(output)]).exit_code == 0
    assert (tmp_path / IMPORTS).read_bytes() == (ROOT / IMPORTS).read_bytes()
    assert CliRunner().invoke(dvc_yaml, ["--output", str(output), "--check"]).exit_code == 0
    stale = json.loads((tmp_path / IMPORTS).read_text(encoding="utf-8"))
    stale["stages"]["judge"].remove("pipeline/experiments/paper/judge.py")
    (tmp_path / IMPORTS).write_text(json.dumps(stale), encoding="utf-8")
    result = CliRunner().invoke(dvc_yaml, ["--output", str(output), "--check"])
    assert result.exit_code != 0 and "imports.json is not the generated one" in result.output


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **GIT_IDENTITY}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{args} failed:\n{result.stdout}\n{result.stderr}"
    return result


def _repro(project: Path, *targets: str) -> set[str]:
    done = _run([sys.executable, "-m", "dvc", "repro", *targets], project)
    return {line.split("'")[1] for line in done.stdout.splitlines() if line.startswith("Running stage")}


def _commit(project: Path) -> None:
    _run(["git", "add", "-A"], project)
    _run(["git", "commit", "-qm", "ran"], project)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for name in ("pipeline", "stages", "data"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("dvc.yaml", "params.yaml", ".dvcignore"):
        shutil.copy(ROOT / name, tmp_path / name)
    params = yaml.safe_load((tmp_path / "params.yaml").read_text())
    params["llm"] |= {"backend": "fake", "model": "fake-model"}
    params["data"]["limit"] = 3
    params["refine"]["max_iterations"] = 2
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    _run(["git", "init", "-q"], tmp_path)
    _run([sys.executable, "-m", "dvc", "init", "-q"], tmp_path)
    return tmp_path


def _edit(project: Path, module: str) -> None:
    with (project / module).open("a", encoding="utf-8") as file:
        file.write("# edited\n")


@pytest.mark.slow
def test_a_module_change_reruns_only_the_stages_that_load_it(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipeline.tools.preflight import stale_llm_stages
    from pipeline.tools.status.dvc_state import dvc_view

    assert _repro(project, PAPER) == {"code", "assess", "judge", "refine", "aggregate"}
    assert _repro(project, PAPER) == set()
    _commit(project)
    monkeypatch.chdir(project)

    # Loaded by refine and aggregate (of the paper's stages), not by assess or judge.
    feedback = "pipeline/loops/feedback.py"
    loading = {s for s, files in read_imports(project).items() if feedback in files}
    assert {"refine", "aggregate"} <= loading and not {"assess", "judge"} & loading
    _edit(project, feedback)
    changed = dvc_view().changed or {}
    for stage in loading:  # named before the code stage has run, as when each stage listed it
        assert f"{feedback} (modified)" in changed[stage], changed[stage]
    assert "assess" not in changed and "judge" not in changed
    assert "refine" in stale_llm_stages(project, []) and "judge" not in stale_llm_stages(project, [])
    assert stale_llm_stages(project, [PAPER]) == {"refine"}  # `repro aggregate` runs refine for it
    assert _repro(project, PAPER) == {"code", "refine", "aggregate"}  # outputs the same: no more
    _commit(project)

    # The code stage run alone: the stage's own digest changed, and the module is still named.
    judge = "pipeline/experiments/paper/judge.py"
    _edit(project, judge)
    assert _repro(project, "code") == {"code"}
    changed = dvc_view().changed or {}
    assert digest_path("judge") in changed["judge"] and f"{judge} (modified)" in changed["judge"]
    assert "refine" not in changed and "assess" not in changed
    assert _repro(project, PAPER) == {"judge"}
