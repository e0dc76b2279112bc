"""Experiments a user runs and undoes: `dvc exp run -S one.value` changes one line of params.yaml,
and a failed `judgeloop exp` (what `make exp` runs) leaves the workspace as it was."""

from __future__ import annotations

import difflib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def _run(args: list[str], cwd: Path, *, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **GIT_IDENTITY, "PYTHONPATH": str(ROOT)}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    if check:
        assert done.returncode == 0, f"{args} failed:\n{done.stdout}\n{done.stderr}"
    return done


def _repo(root: Path, dvc_yaml: str, files: dict[str, str]) -> Path:
    root.mkdir()
    (root / "dvc.yaml").write_text(dvc_yaml, encoding="utf-8")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    _run(["git", "init", "-q"], root)
    _run([sys.executable, "-m", "dvc", "init", "-q"], root)
    return root


def _commit(root: Path) -> None:
    _run(["git", "add", "-A"], root)
    _run(["git", "commit", "-qm", "state"], root)


def test_params_yaml_is_in_the_form_dvc_writes() -> None:
    """DVC rewrites the whole file on `-S` (ruamel, its own style): a file already in that form
    keeps every line but the one changed."""
    hydra = pytest.importorskip("dvc.utils.hydra")
    text = (ROOT / "params.yaml").read_text(encoding="utf-8")
    copy = Path(os.environ.get("TMPDIR", "/tmp")) / f"judgeloop-params-{os.getpid()}.yaml"
    copy.write_text(text, encoding="utf-8")
    try:
        hydra.apply_overrides(str(copy), [])
        rewritten = copy.read_text(encoding="utf-8")
    finally:
        copy.unlink()
    diff = "".join(
        difflib.unified_diff(text.splitlines(True), rewritten.splitlines(True), "params.yaml", "dvc's")
    )
    assert rewritten == text, f"params.yaml is not in DVC's form; write it as DVC does:\n{diff}"


@pytest.mark.slow
@pytest.mark.parametrize(
    "setting", ["refine.threshold=2", "llm.model=gemma3:27b", "rag.limit=4", "summeval.documents=10"]
)
def test_dvc_exp_run_with_one_value_changes_one_line_of_params_yaml(tmp_path: Path, setting: str) -> None:
    section = setting.split(".")[0]
    stage = f"stages:\n  noop:\n    cmd: 'true'\n    params:\n      - {section}\n"
    params = (ROOT / "params.yaml").read_text(encoding="utf-8")
    repo = _repo(tmp_path / "repo", stage, {"params.yaml": params})
    _commit(repo)
    _run([sys.executable, "-m", "dvc", "exp", "run", "-S", setting], repo)
    after = (repo / "params.yaml").read_text(encoding="utf-8")
    changed = [
        line for line in difflib.ndiff(params.splitlines(), after.splitlines()) if line[:2] in ("- ", "+ ")
    ]
    key, value = setting.split("=")
    assert len(changed) == 2, changed
    assert changed[1].lstrip("+ ").startswith(f"{key.split('.')[-1]}: {value}")


STAGES = """\
stages:
  one:
    cmd: python one.py
    deps: [one.py]
    params: [a]
    outs:
      - out/one.txt:
          cache: false
          persist: true
  two:
    cmd: python two.py
    deps: [two.py, out/one.txt]
    params: [fail, two_out]
    outs:
      - ${two_out}:
          cache: false
          persist: true
"""
CODE = {
    "params.yaml": "a: 1\nfail: false\ntwo_out: out/two.txt\n",
    "one.py": (
        "import yaml\n"
        "p = yaml.safe_load(open('params.yaml'))\n"
        "open('out/one.txt', 'w').write(f\"one made with a={p['a']}\\n\")\n"
    ),
    "two.py": (
        "import sys, yaml\n"
        "p = yaml.safe_load(open('params.yaml'))\n"
        "open(p['two_out'], 'w').write('two: ' + open('out/one.txt').read())\n"
        "sys.exit('two fails, as asked' if p['fail'] else 0)\n"
    ),
}


def _state(root: Path) -> dict[str, str]:
    files = [p for p in root.rglob("*") if p.is_file() and not {".git", ".dvc"} & set(p.parts)]
    return {str(p.relative_to(root)): p.read_text(encoding="utf-8") for p in sorted(files)}


@pytest.mark.slow
def test_a_failed_experiment_leaves_params_and_the_last_good_outputs_as_they_were(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo", STAGES, CODE)
    (repo / "out").mkdir()
    _run([sys.executable, "-m", "dvc", "repro"], repo)
    _commit(repo)
    before = _state(repo)
    assert before["out/two.txt"] == "two: one made with a=1\n"

    # Stage one succeeds with a=2 and rewrites its output; stage two writes a new file, then fails.
    cli = [sys.executable, "-m", "pipeline.tools.cli", "exp"]
    failed = _run([*cli, "-S", "a=2", "-S", "fail=true", "-S", "two_out=out/new.txt"], repo, check=False)
    assert failed.returncode != 0
    assert "two fails, as asked" in failed.stderr
    assert "params.yaml, dvc.lock and every stage's outputs are back as they were" in failed.stderr
    assert _state(repo) == before  # params.yaml, dvc.lock, out/one.txt; and out/new.txt is gone
    assert _run(["git", "status", "--porcelain"], repo).stdout == ""

    # The same experiment, fixed, succeeds and keeps its results.
    _run([*cli, "-S", "a=2"], repo)
    assert (repo / "out" / "two.txt").read_text() == "two: one made with a=2\n"
    assert yaml.safe_load((repo / "params.yaml").read_text())["a"] == 2
    assert not list((repo / ".judgeloop" / "snapshots").iterdir())  # nothing left aside


def test_make_exp_runs_judgeloop_exp() -> None:
    """`make exp` is the restoring command, not a bare `dvc exp run`."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    block = makefile.split("\nexp:", 1)[1].split("\n\n", 1)[0]
    recipe = "\n".join(line for line in block.splitlines() if line.startswith("\t"))
    assert "$(JUDGELOOP) exp" in recipe and "dvc exp run" not in recipe
