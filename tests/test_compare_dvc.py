"""`judgeloop compare` in a real git + DVC project (compare-review): each run's metrics file is where
that run's own params put it (not the workspace's); two commits compare with no params.yaml in the
workspace, or one judgeloop refuses; an unknown run is named with the fix; a change points to
`judgeloop diff` for whether it exceeds noise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT
from tests.test_experiments import _commit, _repo

PARAMS = (ROOT / "params.yaml").read_text(encoding="utf-8")
GOOD = json.loads((ROOT / "outputs/paper/metrics.json").read_text(encoding="utf-8"))
STAGE = """\
stages:
  aggregate:
    cmd: python write.py
    params: [aggregate.metrics_out]
    metrics:
      - ${aggregate.metrics_out}:
          cache: false
"""


def _compare(repo: Path, *runs: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "pipeline.tools.cli", "compare", *runs],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _metrics(repo: Path, path: str, accuracy_after: float) -> None:
    metrics = json.loads(json.dumps(GOOD))
    metrics["figure2"]["accuracy"]["after"]["mean"] = accuracy_after
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(json.dumps(metrics), encoding="utf-8")


def _two_commits(tmp_path: Path) -> Path:
    """HEAD~1: the metrics at outputs/paper/metrics.json; HEAD: moved (aggregate.metrics_out) and changed."""
    repo = _repo(tmp_path / "repo", STAGE, {"params.yaml": PARAMS, "write.py": ""})
    _metrics(repo, "outputs/paper/metrics.json", 5.0)
    _commit(repo)
    moved = "metrics_out: outputs/paper/moved.json"
    (repo / "params.yaml").write_text(PARAMS.replace("metrics_out: outputs/paper/metrics.json", moved))
    (repo / "outputs/paper/metrics.json").unlink()
    _metrics(repo, "outputs/paper/moved.json", 3.5)
    _commit(repo)
    return repo


def test_each_run_reads_its_metrics_where_its_params_put_them(tmp_path: Path) -> None:
    repo = _two_commits(tmp_path)
    for workspace in ("as committed", "without params.yaml", "refused by judgeloop"):
        if workspace == "without params.yaml":
            (repo / "params.yaml").unlink()
        if workspace == "refused by judgeloop":  # 010: octal to YAML 1.1, ten to DVC's 1.2
            (repo / "params.yaml").write_text(PARAMS + "\nodd:\n  seed: 010\n", encoding="utf-8")
        shown = _compare(repo, "HEAD~1", "HEAD")
        assert shown.returncode == 0, (workspace, shown.stderr)
        out = shown.stdout
        assert "aggregate.metrics_out: 'outputs/paper/metrics.json' → 'outputs/paper/moved.json'" in out
        row = next((line for line in out.splitlines() if line.startswith("  accuracy after")), "")
        assert row.split()[-3:] == ["5", "3.5", "-1.5"], (workspace, out)
        assert "judgeloop diff HEAD~1 HEAD" in out, out  # whether -1.5 exceeds the judge's noise


def test_an_unknown_run_is_named_with_its_fix(tmp_path: Path) -> None:
    repo = _two_commits(tmp_path)
    shown = _compare(repo, "HEAD~1", "no-such-run")
    assert shown.returncode == 1 and "Traceback" not in shown.stderr
    error = shown.stderr
    assert "'no-such-run'" in error and "HEAD~1" not in error, error
    assert "Fix:" in error and "git log" in error and "dvc exp show" in error, error


def test_nothing_changed_says_so_without_pointing_to_diff(tmp_path: Path) -> None:
    repo = _two_commits(tmp_path)
    shown = _compare(repo, "HEAD", "workspace")
    assert shown.returncode == 0, shown.stderr
    assert "params: the same" in shown.stdout and "judgeloop diff" not in shown.stdout, shown.stdout


def test_two_names_of_one_commit(tmp_path: Path) -> None:
    """DVC answers two revisions of one commit under one key ("main,HEAD"): each is still found."""
    repo = _two_commits(tmp_path)
    subprocess.run(["git", "branch", "-q", "other"], cwd=repo, check=True)
    shown = _compare(repo, "other", "HEAD")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("other → HEAD\nparams: the same\n"), shown.stdout


def test_a_metrics_file_dvc_cannot_read_is_said(tmp_path: Path) -> None:
    repo = _two_commits(tmp_path)
    (repo / "outputs/paper/moved.json").write_text("{not json", encoding="utf-8")
    shown = _compare(repo, "HEAD", "workspace")
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "  (outputs/paper/moved.json in workspace: DVC cannot read it:" in out, out
    assert "judgeloop diff" not in out, out  # no number moved: none is there to test


def test_a_revision_that_names_no_commit_is_said(tmp_path: Path) -> None:
    """HEAD:params.yaml (a file of a commit) and HEAD^{tree} are git revisions but no commits: DVC
    raised AttributeError from inside pygit2, a traceback."""
    repo = _two_commits(tmp_path)
    for rev in ("HEAD:params.yaml", "HEAD^{tree}"):
        shown = _compare(repo, rev, "HEAD")
        assert shown.returncode == 1 and "Traceback" not in shown.stderr, shown.stderr
        assert f"{rev!r} names a" in shown.stderr and "not a commit" in shown.stderr, shown.stderr
    empty = _compare(repo, "", "HEAD")
    assert empty.returncode == 2 and "a run's name is empty" in empty.stderr, empty.stderr
