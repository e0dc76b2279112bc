"""What the commands print of a model's words on a terminal is shown escaped (pipeline.llm.terminal):
a reply holding ESC [2J, an OSC title or a bidi override cannot act on the terminal, whichever
command prints it. audit, diff and the errors have their own tests (test_audit_escaping,
test_trust_readers); these are the commands found printing a reply raw (writers-red)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from click.testing import CliRunner

from pipeline.experiments.rag import judge_evaluate
from pipeline.experiments.rag.params import load_rag_params
from pipeline.judges.structured.judge import DimensionScore, ScoredDimensions, UnscoredDimensions
from pipeline.tools.cli import main

HOSTILE = "fine\x1b]0;owned\x07\x1b[2J\x1b[1A\r\u202eevil\x9b31m"
RAW = ("\x1b", "\x07", "\r", "\u202e", "\x9b")


def _judge_evaluate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, verdict: object) -> str:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"llm": {"backend": "fake", "model": "m"}}))
    (tmp_path / "answer.txt").write_text("an answer")
    monkeypatch.setattr(
        judge_evaluate, "run_judge_evaluate", lambda *a, **k: [SimpleNamespace(judgement=verdict)]
    )
    result = CliRunner().invoke(main, ["judge-evaluate", "a question", "--answer-file", "answer.txt"])
    return result.output


def _scored(tmp_path: Path) -> ScoredDimensions:
    params = load_rag_params(tmp_path / "params.yaml")
    names = [d.name for d in params.rag.dimensions.items]
    return ScoredDimensions(
        reasoning=HOSTILE,
        dimensions={n: DimensionScore(score=4, value=0.75) for n in names},
        overall=0.75,
        overall_simple=0.75,
        confidence=4,
        confidence_value=0.75,
        attempts=1,
        call_keys=("k",),
    )


def test_judge_evaluate_prints_the_judge_s_reasoning_escaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"llm": {"backend": "fake", "model": "m"}}))
    output = _judge_evaluate(tmp_path, monkeypatch, _scored(tmp_path))
    assert "reasoning: fine\\x1b]0;owned\\x07\\x1b[2J" in output, output
    assert not any(char in output for char in RAW), repr(output)


def test_judge_evaluate_prints_a_failed_reply_s_error_escaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failed = UnscoredDimensions(
        kind="invalid", error=HOSTILE, text=HOSTILE, attempts=3, problems=(), call_keys=("k",)
    )
    output = _judge_evaluate(tmp_path, monkeypatch, failed)
    assert "the judge gave no usable reply" in output and "\\x1b[2J" in output, output
    assert not any(char in output for char in RAW), repr(output)


def test_exp_list_prints_an_experiment_s_params_escaped(monkeypatch: pytest.MonkeyPatch) -> None:
    """A teammate's experiment (its params.yaml committed to an experiment ref) sets a value holding
    an OSC title and ESC [2J: `judgeloop exp list` shows it escaped."""
    from pipeline.tools import exp_list
    from pipeline.tools.dvc_run import exp
    from tests.conftest import ROOT

    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(exp_list, "experiments", lambda all_commits=False: [("mate", "abc1234", "base")])
    runs = {
        "base": {"params.yaml": {"refine": {"keep": "last"}}},
        "mate": {"params.yaml": {"refine": {"keep": HOSTILE}}},
    }
    monkeypatch.setattr(exp_list, "read_runs", lambda revs: ({r: {} for r in revs}, runs))
    result = CliRunner().invoke(exp, ["list"])
    assert result.exit_code == 0, result.output
    assert "refine.keep=fine\\x1b]0;owned\\x07" in result.output, result.output
    assert not any(char in result.output for char in RAW), repr(result.output)


def test_calibrate_prints_a_metric_name_from_the_files_escaped(tmp_path: Path) -> None:
    """The metric names of `calibrate --scores --human` come from the files given: shown escaped."""
    from tests.test_cli_calibrate import human_rows, score_rows, write_jsonl

    rows = human_rows(n_groups=6, n_systems=4)
    humans = [{**h, "metric": "coherence" + HOSTILE} for h in rows if h["metric"] == "coherence"]
    scores = score_rows(humans, [float(sum(h["ratings"])) for h in humans])
    s, h = write_jsonl(tmp_path / "s.jsonl", scores), write_jsonl(tmp_path / "h.jsonl", humans)
    result = CliRunner().invoke(
        main, ["calibrate", "--scores", str(s), "--human", str(h), "--resamples", "100"]
    )
    assert result.exit_code == 0, result.output
    assert "coherencefine\\x1b]0;owned\\x07" in result.output, result.output
    assert not any(char in result.output for char in RAW), repr(result.output)


def test_judge_evaluate_batch_prints_a_row_s_id_escaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rows file's id (the user's data, or a colleague's) named in a skipped row's line: escaped."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"llm": {"backend": "fake", "model": "m"}}))
    row = {"id": "q" + HOSTILE, "question": "q?", "answer": "a"}
    (tmp_path / "rows.jsonl").write_text(json.dumps(row) + "\n" + json.dumps(row) + "\n")
    monkeypatch.setattr(judge_evaluate, "run_judge_evaluate", lambda *a, **k: [])
    result = CliRunner().invoke(main, ["judge-evaluate", "--batch", "rows.jsonl", "--out", "scores.jsonl"])
    assert "already used on line 1" in result.output and "qfine\\x1b]0;owned\\x07" in result.output, (
        result.output
    )
    assert not any(char in result.output for char in RAW), repr(result.output)


def test_exp_list_shows_a_tab_as_a_tab_as_diff_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """A value's tab is printed as a tab, as `diff` and `audit` print one (it cannot start a line);
    a line break is its escape, so each experiment stays its lines (show-esc; review5's mend of diff)."""
    from pipeline.tools import exp_list
    from pipeline.tools.dvc_run import exp
    from tests.conftest import ROOT

    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(exp_list, "experiments", lambda all_commits=False: [("mate", "abc1234", "base")])
    runs = {
        "base": {"params.yaml": {"refine": {"keep": "last"}}},
        "mate": {"params.yaml": {"refine": {"keep": "a\tb\nc\u202e"}}},
    }
    monkeypatch.setattr(exp_list, "read_runs", lambda revs: ({r: {} for r in revs}, runs))
    result = CliRunner().invoke(exp, ["list"])
    assert result.exit_code == 0, result.output
    assert "refine.keep=a\tb\\nc\\u202e" in result.output, repr(result.output)


def test_status_shows_a_model_name_s_tab_as_a_tab_as_diff_does() -> None:
    from pipeline.llm.types import ModelIdentity
    from pipeline.tools.status.prediction import Prediction, StageStatus
    from pipeline.tools.status.report import render_text

    model = ModelIdentity(backend="ollama", name="judge\tv2\n# forged\u202e", digest="sha256:d")
    stage = StageStatus(stage="judge", runs=True, why="its params\tchanged")
    text = render_text(Prediction(model, "the server", "auto", "dvc.yaml", [stage]), verbose=False)
    assert text.startswith("model: ollama judge\tv2\\n# forged\\u202e sha256:d (the server)\n"), repr(text)
    assert "judge runs  its params\tchanged\n" in text, repr(text)
