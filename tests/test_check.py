"""`judgeloop check`: the committed experiments replayed in one process and compared with dvc.lock.

Run on a copy of the committed project (params.yaml, dvc.lock, data, recordings, outputs), so the
checkout is never touched; the copy is then damaged on purpose: the check must fail, naming what."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from pipeline.llm.recordings.verified_memo import forget_in_process
from pipeline.tools.check import check
from tests.conftest import ROOT

PROJECT = ("params.yaml", "dvc.lock", "dvc.yaml", "data", "recordings", "outputs")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in PROJECT:
        source, target = ROOT / name, tmp_path / name
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns(".*.tmp"))
        else:
            shutil.copy2(source, target)
    monkeypatch.chdir(tmp_path)
    forget_in_process()  # each test verifies the recordings it reads from scratch
    return tmp_path


def locked(path: str) -> str:
    """The md5 that the committed dvc.lock gives an out (read, not written here: a re-record moves it)."""
    lock = yaml.safe_load((ROOT / "dvc.lock").read_text(encoding="utf-8"))
    for stage in lock["stages"].values():
        for out in stage.get("outs", []):
            if out["path"] == path:
                return str(out["md5"])
    raise AssertionError(f"dvc.lock locks no out {path}")


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(check, list(args))
    return result.exit_code, result.output


def test_the_committed_design_reproduces_its_lock_stage_by_stage(project: Path) -> None:
    code, output = run("rag")
    assert code == 0, output
    assert "ok  rag_judge: 2 outs as locked" in output
    assert "ok  rag_aggregate: 3 outs as locked" in output
    assert "every stage reproduces dvc.lock (2 stages" in output
    # The workspace is the check's input only: nothing written there.
    assert not (project / ".judgeloop").exists()


def test_a_stage_s_results_are_written_as_they_come_never_held_whole(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the stage runner writes them (issue 33: refine's results are 3.2 GB of JSON at 1M calls;
    the check held them in a list, 997 MB at 96k calls with each out also read whole to hash it)."""
    from pipeline.experiments.steps import LLMStep

    def held_whole(*_: object) -> None:
        raise AssertionError("a stage's results held whole (LLMStep.work)")

    monkeypatch.setattr(LLMStep, "work", held_whole)
    code, output = run("rag")
    assert code == 0, output
    assert "every stage reproduces dvc.lock (2 stages" in output


def test_a_tampered_output_fails_naming_it(project: Path) -> None:
    results = project / "outputs" / "rag" / "judgements.jsonl"
    results.write_bytes(results.read_bytes().replace(b'"score":', b'"score": ', 1))
    code, output = run("rag")
    assert code == 1
    assert "DIFFERS rag_judge" in output
    locked_md5 = locked("outputs/rag/judgements.jsonl")
    assert f"outputs/rag/judgements.jsonl (in the workspace): locked {locked_md5}" in output
    assert "rag_aggregate" not in output  # it stops at the first difference


def test_a_tampered_recording_fails_before_any_of_it_is_served(project: Path) -> None:
    calls = project / "recordings" / "rag_judge" / "calls.jsonl"
    lines = calls.read_text(encoding="utf-8").splitlines(keepends=True)
    # A reply edited, its checksum left: the recording no longer matches its pin in dvc.lock.
    edited = next(i for i, line in enumerate(lines) if '"reply":' in line)
    lines[edited] = lines[edited].replace('"text":"', '"text":"edited ', 1)
    calls.write_text("".join(lines), encoding="utf-8")
    code, output = run("rag")
    assert code == 1
    assert "DIFFERS rag_judge" in output
    assert f"recordings/rag_judge (in the workspace): locked {locked('recordings/rag_judge')}" in output
    assert "the replay failed" in output and "does not match its entry in dvc.lock" in output


def test_a_tampered_lock_fails(project: Path) -> None:
    lock = project / "dvc.lock"
    lock.write_text(
        lock.read_text(encoding="utf-8").replace(locked("outputs/rag/report.html"), "f" * 32),
        encoding="utf-8",
    )
    code, output = run("rag")
    assert code == 1
    assert "ok  rag_judge" in output
    assert "DIFFERS rag_aggregate" in output
    assert "outputs/rag/report.html (replayed): locked ffffffffffffffffffffffffffffffff" in output


def test_a_hostile_path_in_the_lock_is_printed_escaped(project: Path) -> None:
    """dvc.lock comes in a pull request: a path holding an OSC title, ESC [2J or a bidi override is
    printed with each control shown as its escape, never raw (writers-red; before: printed raw)."""
    lock_path = project / "dvc.lock"
    lock = yaml.safe_load(lock_path.read_text(encoding="utf-8"))
    hostile = "outputs/rag/\x1b]0;owned\x07\x1b[2J\r\u202eevil.jsonl"
    lock["stages"]["rag_judge"]["outs"].append({"path": hostile, "md5": "0" * 32, "size": 1})
    lock_path.write_text(yaml.safe_dump(lock, sort_keys=False), encoding="utf-8")
    code, output = run("rag")
    assert code == 1
    assert "outputs/rag/\\x1b]0;owned\\x07\\x1b[2J\\r\\u202eevil.jsonl (in the workspace)" in output, output
    assert not any(char in output for char in "\x1b\x07\r\u202e"), repr(output)


def test_an_out_reached_through_a_folder_link_leading_out_is_not_read(tmp_path: Path) -> None:
    """A pull request's link on the way to an out (`outputs/x` -> `/`, dvc.lock naming
    `outputs/x/usr`) would have the check hash whatever it leads to (a whole system folder, in CI):
    the out is said to lead out, never read."""
    from pipeline.llm.recordings.pins import dir_md5
    from pipeline.tools.check import LockedOut, LockedStage, differences

    outside, root = tmp_path / "outside", tmp_path / "project"
    (outside / "inner").mkdir(parents=True)
    (outside / "inner" / "secret").write_text("hunter2", encoding="utf-8")
    (root / "outputs").mkdir(parents=True)
    (root / "outputs" / "x").symlink_to(outside)
    stage = LockedStage("s", (LockedOut("outputs/x/inner", "0" * 32 + ".dir"),), ())
    [said] = differences(stage, root, "in the workspace")
    assert dir_md5(outside / "inner") not in said
    assert "a link leading out of the project (outputs/x)" in said
