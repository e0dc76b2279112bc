"""The SummEval experiment: the judge step over the fake backend (argmax and weighted scores, failures
recorded unscored), the calibrate step on the demo set, and `judgeloop calibrate --experiment`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from pipeline.data.jsonl import read_jsonl, write_jsonl
from pipeline.data.summeval import human_ratings, load_summeval, subset
from pipeline.experiments.summeval.calibration import experiment_rows, judge_outcomes, summeval_metrics
from pipeline.experiments.summeval.judge import judge_order, run_summeval_judge
from pipeline.experiments.summeval.params import SummEvalParams, SummEvalSettings
from pipeline.experiments.summeval.results import SummEvalJudgement
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.types import CallContext, ChatReply, ChatRequest, Message, TokenLogprob, TopLogprob
from pipeline.tools.cli import main as judgeloop
from stages.runner import main as stage
from tests.conftest import ROOT
from tests.helpers import make_session

DEMO = ROOT / "data" / "summeval-demo"


def _reply_with_score_logprobs(request: ChatRequest) -> ChatReply:
    # The tokens spell the reply; at the score token the model put 0.5 on 4, 0.3 on 3 and 0.1 on 5,
    # and 0.1 on a token that is no score: renormalised over 1-5, G-Eval's score is 3.888...
    tokens = ['{"', "score", '":', " ", "4", "}"]
    top_at_score = (
        TopLogprob(token="4", logprob=math.log(0.5)),
        TopLogprob(token="3", logprob=math.log(0.3)),
        TopLogprob(token="five", logprob=math.log(0.1)),
        TopLogprob(token=" 5", logprob=math.log(0.1)),
    )
    logprobs = tuple(
        TokenLogprob(
            token=t, logprob=math.log(0.5) if t == "4" else 0.0, top=top_at_score if t == "4" else ()
        )
        for t in tokens
    )
    return ChatReply(text="".join(tokens), done_reason="stop", logprobs=logprobs)


def _demo_params(**summeval: object) -> SummEvalParams:
    settings = SummEvalSettings.model_validate({"corpus": str(DEMO), **summeval})
    return SummEvalParams(summeval=settings)


def test_the_judge_step_records_the_written_and_the_weighted_score(tmp_path: Path) -> None:
    params = _demo_params(dimensions=["coherence", "relevance"])
    corpus = subset(load_summeval(DEMO), 1)
    # One call at a time, as the embedded backend runs: the calls' order is the step's.
    backend = FakeBackend(_reply_with_score_logprobs, parallelism=1)
    session, fake = make_session(tmp_path, stage="summeval_judge", backend=backend)
    rows = run_summeval_judge(params, session, corpus)
    assert len(rows) == len(fake.calls) == 4 * 2  # 4 systems x 2 dimensions, one call each
    expected = (0.5 * 4 + 0.3 * 3 + 0.1 * 5) / 0.9
    for row in rows:
        assert row.score == 4 and row.failure is None and row.attempts == 1
        assert row.weighted_score == pytest.approx(expected, abs=1e-6)
        assert row.probabilities == {
            "1": 0.0,
            "2": 0.0,
            "3": pytest.approx(1 / 3),
            "4": pytest.approx(5 / 9),
            "5": pytest.approx(1 / 9),
        }
        assert row.mass == pytest.approx(0.9)
    # Each call asked for the schema, the log-probabilities and the step's own token budget.
    request = fake.calls[0]
    assert request.format is not None and request.logprobs == 20 and request.options.num_predict == 16
    contexts = [(c.context.item, c.context.label("metric")) for c in session.calls]
    assert contexts == [(s.item, d) for s, d in judge_order(corpus, ("coherence", "relevance"))]
    # Calls follow article, then dimension, so one article's rubric prefix is shared in a row.
    assert [d for _, d in contexts] == ["coherence"] * 4 + ["relevance"] * 4


def test_a_reply_that_never_validates_is_recorded_unscored_and_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = subset(load_summeval(DEMO), None)
    d3_texts = {s.text.strip() for s in corpus.summaries if s.system == "D3"}

    def _d3(request: ChatRequest) -> bool:
        return any(text in request.messages[0].content for text in d3_texts)

    session, fake = make_session(
        tmp_path,
        stage="summeval_judge",
        responder=lambda r: (
            ChatReply(text='{"score": ', done_reason="length", completion_tokens=16)
            if _d3(r)
            else _reply_with_score_logprobs(r)
        ),
    )
    params = _demo_params(dimensions=["fluency"])
    rows = run_summeval_judge(params, session, corpus)
    failed = [r for r in rows if r.system == "D3"]
    assert len(failed) == 3 and all(r.score is None and r.weighted_score is None for r in failed)
    assert {r.failure for r in failed} == {"truncated"} and all(r.attempts == 2 for r in failed)
    assert all(r.text == '{"score": ' for r in failed)  # the reply kept, not replaced by a value
    assert len(fake.calls) == 9 + 3 * 2  # each failure re-asked once
    assert judge_outcomes(rows) == {
        "fluency": {
            "calls_judged": 15,  # the calls made, re-asks included, as audit lists them
            "scored": 9,
            "scored_after_reask": 0,
            "scored_without_logprobs": 0,
            "unscored_truncated": 3,
        }
    }
    write_jsonl(tmp_path / "j.jsonl", rows)
    monkeypatch.chdir(tmp_path)  # outputs are named inside the project (the working folder)
    rows_for_calibration = experiment_rows(_demo_params(dimensions=["fluency"], out="j.jsonl"))
    _, metrics = summeval_metrics(params, rows_for_calibration)
    fluency = metrics["metrics"]["fluency"]
    assert fluency["score"]["items_unscored"] == 3 and fluency["score"]["items_used"] == 9
    assert fluency["weighted_score"]["items_unscored"] == 3


def _write_params(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **summeval: object) -> Path:
    """params.yaml in `tmp_path`, made the working folder: the outputs are named inside it."""
    monkeypatch.chdir(tmp_path)
    section = {
        "corpus": str(DEMO),
        "out": "out/judgements.jsonl",
        "metrics_out": "out/metrics.json",
        "plot_csv": "out/scores.csv",
        "html_report": "out/report.html",
        "resamples": 200,
        **summeval,
    }
    params = {
        "llm": {"backend": "fake", "model": "fake-judge"},
        "cache": {"dir": str(tmp_path / "cache"), "recordings": "recordings"},
        "summeval": section,
    }
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params), encoding="utf-8")
    return path


def test_the_calibrate_step_on_the_demo_set_writes_metrics_plot_data_and_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Judgements equal to the experts' rounded mean (argmax) and to the mean itself (weighted).
    corpus = load_summeval(DEMO)
    humans = {(h.item, h.metric): h.mean for h in human_ratings(corpus)}
    rows = [
        SummEvalJudgement(
            item=s.item,
            document=s.document,
            system=s.system,
            dimension=d,
            score=round(humans[s.item, d]),
            weighted_score=humans[s.item, d],
            probabilities=None,
            mass=None,
            failure=None,
            error=None,
            attempts=1,
            text="",
        )
        for s, d in judge_order(corpus, ("coherence", "consistency", "fluency", "relevance"))
    ]
    params_path = _write_params(tmp_path, monkeypatch)
    write_jsonl(tmp_path / "out" / "judgements.jsonl", rows)
    result = CliRunner().invoke(
        stage, ["summeval", "summeval_calibrate"], env={"JUDGELOOP_PARAMS": str(params_path)}
    )
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text(encoding="utf-8"))
    assert set(metrics["metrics"]) == {"coherence", "consistency", "fluency", "relevance"}
    for name, metric in metrics["metrics"].items():
        assert metric["items_judged"] == 12 and metric["items_without_human"] == 0
        weighted_global = metric["weighted_score"]["levels"]["global"]
        assert weighted_global["pearson"]["value"] == pytest.approx(1.0), name
        assert metric["human_alpha"] is not None
    assert metrics["subset"] == {
        "annotators": "expert",
        "dimensions": ["coherence", "consistency", "fluency", "relevance"],
        "documents": 3,
        "systems": 4,
    }
    assert metrics["judge"]["outcomes"]["coherence"]["scored"] == 12
    csv_lines = (tmp_path / "out" / "scores.csv").read_text(encoding="utf-8").splitlines()
    assert csv_lines[0] == "item,dimension,human_mean,judge_score,judge_weighted" and len(csv_lines) == 49
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert page.count('<svg class="scatter"') == 4 and page.count('<circle class="weighted_score"') == 48
    # The page names the model its recorded calls hold, not params.yaml's (issue 32): none here.
    assert "weighted (G-Eval)" in page and "no call recorded" in page and "fake-judge" not in page
    # The page is rendered with autoescape: a model name is data, not markup (one recorded call).
    session, _ = make_session(tmp_path, stage="summeval_judge", backend=FakeBackend(name="<b>judge</b>"))
    session.chat(
        ChatRequest(messages=(Message(role="user", content="hi"),)),
        CallContext(stage="summeval_judge", item="x"),
    )
    session.close()
    assert (
        CliRunner()
        .invoke(stage, ["summeval", "summeval_calibrate"], env={"JUDGELOOP_PARAMS": str(params_path)})
        .exit_code
        == 0
    )
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "<b>judge</b>" not in page and "&lt;b&gt;judge&lt;/b&gt;" in page


def test_calibrate_experiment_reads_the_experiments_own_judgements(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    params_path = _write_params(tmp_path, monkeypatch, documents=2, dimensions=["coherence", "relevance"])
    env = {"JUDGELOOP_PARAMS": str(params_path)}
    runner = CliRunner()
    missing = runner.invoke(judgeloop, ["calibrate", "--experiment", "summeval"], env=env)
    assert missing.exit_code != 0 and "judgements.jsonl" in missing.output and "dvc repro" in missing.output
    assert runner.invoke(stage, ["summeval", "summeval_judge"], env=env).exit_code == 0
    assert len(read_jsonl(tmp_path / "out" / "judgements.jsonl", SummEvalJudgement)) == 2 * 4 * 2
    assert runner.invoke(stage, ["summeval", "summeval_calibrate"], env=env).exit_code == 0
    shown = runner.invoke(judgeloop, ["calibrate", "--experiment", "summeval", "--json"], env=env)
    assert shown.exit_code == 0, shown.output
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text(encoding="utf-8"))
    data = json.loads(shown.output)
    assert data["metrics"] == metrics["metrics"] and data["bootstrap"]["resamples"] == 200
    table = runner.invoke(judgeloop, ["calibrate", "--experiment", "summeval"], env=env)
    assert table.exit_code == 0 and "coherence: 8 items judged" in table.output
    both = runner.invoke(
        judgeloop, ["calibrate", "--experiment", "summeval", "--scores", str(params_path)], env=env
    )
    assert both.exit_code != 0 and "not both" in both.output
    neither = runner.invoke(judgeloop, ["calibrate"], env=env)
    assert neither.exit_code != 0 and "--experiment" in neither.output
