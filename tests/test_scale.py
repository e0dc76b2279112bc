"""The paper's design at 10k synthetic calls, end to end (issue 33): record, replay from the
recordings alone, audit one call and one item, verify and collect the cache.

The run is pipeline.testing.synthetic's (about 1,000 interviews of 20 kB, the text protocol, the
experiment responder: refinement rounds and re-asks run), the stages in process as their DVC
stages run them; the real `dvc repro` round trip is tests/test_pipeline_dvc.py's and
tests/test_recordings_remote.py's. What each part costs at 10k, 100k and 1M calls is
bench/million.py's to measure, not this test's. JUDGELOOP_SCALE_CALLS sizes it down (or up).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.llm.recordings import stage_folders, stage_reader
from pipeline.testing.synthetic import audit_one_judgement, items_for, make_project, run_stages
from pipeline.tools.cli import main
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

CALLS = int(os.environ.get("JUDGELOOP_SCALE_CALLS", "10000"))


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for folder in ("recordings", "outputs")
        for p in sorted((root / folder).rglob("*.jsonl"))
    }


def _cli(root: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> str:
    monkeypatch.chdir(root)
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_the_paper_at_ten_thousand_calls_records_replays_audits_and_collects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = items_for(CALLS)
    make_project(tmp_path, items, 20_000, ROOT / "params.yaml")
    made = run_stages(tmp_path, "auto")
    assert made >= CALLS * 0.8, made  # the shape gives the calls it was sized for
    recorded = _snapshot(tmp_path)
    stages = {d.name for d in stage_folders.stage_dirs(tmp_path / "recordings")}
    assert stages == {"assess", "judge", "refine"}
    refine = [c for c in stage_reader.read_stage(tmp_path / "recordings" / "refine")]
    assert any((c.call.context.step or 0) >= 1 for c in refine)  # refinement rounds ran

    # A collaborator with the recordings alone: no local cache, replay mode, nothing to the model.
    shutil.rmtree(tmp_path / ".judgeloop")
    assert run_stages(tmp_path, "replay") == made
    assert _snapshot(tmp_path) == recorded

    item, audit_call = audit_one_judgement(items)
    one = _cli(tmp_path, monkeypatch, *audit_call, "--format", "jsonl")
    shown = [json.loads(line) for line in one.splitlines()]
    assert shown and {c["context"]["item"] for c in shown} == {item}
    every = [
        json.loads(line)
        for line in _cli(tmp_path, monkeypatch, "audit", "--item", item, "--format", "jsonl").splitlines()
    ]
    assert {c["context"]["item"] for c in every} == {item}
    assert {c["context"]["labels"]["role"] for c in every} >= {"assess", "judge"}
    assert len(every) >= 5  # its assessment and four judgements at least

    verified = _cli(tmp_path, monkeypatch, "cache", "verify")
    assert f" local, {made} recorded calls)" in verified and "all records verify" in verified
    collected = _cli(tmp_path, monkeypatch, "cache", "gc")  # every entry is referenced: none goes
    assert collected.startswith("deleted 0 of "), collected
