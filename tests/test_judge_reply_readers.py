"""Every reader of a judge reply reads it as the judge stage did: the stage, `judgeloop audit` and the
report all go through pipeline.judges.rubric.judge.reply_reader, with the metric the call asked for and
params.yaml's decimal policy (issue 30). A reply that rates every metric on its own line, one of them
with a decimal, is the case where reading without the metric or the policy gives another answer."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.data.jsonl import read_jsonl
from pipeline.experiments.paper.aggregate import report
from pipeline.experiments.paper.params import load_paper_params
from pipeline.experiments.paper.report.html import load_records
from pipeline.experiments.paper.report.items import ItemBuilder, options_text
from pipeline.experiments.paper.report.texts import PageTexts
from pipeline.judges.rubric.judge import SCALE, reply_reader
from pipeline.judges.rubric.results import AssessmentJudgements
from pipeline.judges.scores import extract_score
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.types import ChatReply, ChatRequest
from pipeline.loops.results import Refinement
from pipeline.tools.cli import main
from tests.project import MODEL, run_pipeline, scripted, write_data, write_params

# Every metric on its own line; completeness with a decimal, which judge.decimal_scores=round makes 3.
MULTI_METRIC = (
    "I rate the assessment on each metric.\n"
    "Coherence: 4/5\nCompleteness: 2.5/5\nSpecificity: 3/5\nAccuracy: 5/5"
)
EXPECTED = {
    "coherence": (4, "labelled"),
    "completeness": (3, "decimal_rounded"),
    "specificity": (3, "labelled"),
    "accuracy": (5, "labelled"),
}


def _replies(request: ChatRequest) -> str:
    judged = re.search(r"output for (\w+) only", request.messages[0].content)
    return MULTI_METRIC if judged else scripted(request)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    write_data(tmp_path, ("901",))
    write_params(tmp_path, judge={"decimal_scores": "round", "max_attempts": 1})
    run_pipeline(tmp_path, FakeBackend(_replies, name=MODEL))
    return tmp_path


def test_the_reply_read_without_the_metric_and_policy_says_otherwise() -> None:
    """What the report and the audit read before issue 30: no score at all, where the stage read four."""
    assert extract_score(MULTI_METRIC, SCALE).score is None


def test_stage_audit_and_report_read_a_multi_metric_reply_alike(project: Path) -> None:
    params = load_paper_params(project / "params.yaml")
    [row] = read_jsonl(project / params.judge.out, AssessmentJudgements)
    stage = {metric: (j.score, j.reading) for metric, j in row.metrics.items()}
    assert stage == EXPECTED

    result = CliRunner().invoke(main, ["audit", "--role", "judge", "--format", "jsonl"])
    assert result.exit_code == 0, result.stderr
    calls = [json.loads(line) for line in result.stdout.splitlines()]
    assert {c["context"]["stage"] for c in calls} == {"judge", "refine"}  # the refine stage re-judges too
    for call in calls:
        metric = call["context"]["labels"]["metric"]
        assert (call["score"]["score"], call["score"]["reason"]) == EXPECTED[metric]

    # The report reads every judge call again, and notes where its reading is not the judgement's.
    records = load_records(Path(params.cache.recordings))
    options = {options_text(record): "options" for record in records.values()}
    builder = ItemBuilder(records, PageTexts(), options, reply_reader(params.judge))
    [refinement] = read_jsonl(project / params.refine.out, Refinement)
    for it in refinement.iterations:
        for metric, judged in it.metrics.items():
            if judged.carried_over:
                continue
            keys = judged.call_keys
            views = builder._calls(keys, "x", metric, judged)  # the reading, before templating
            assert [(v.reading, v.reading_note) for v in views] == [("", "")]  # read as the judgement says
            assert (judged.score, judged.reading) == EXPECTED[metric]
    pages = report(params)  # the aggregate stage's own wiring of the reader
    html = "".join(p.read_text(encoding="utf-8") for p in pages if p.suffix == ".html")
    assert "non_integer" not in html and "no_score" not in html  # what a reading without them gives


# judge.output=json: the first reply is a whole JSON object, but cut by num_predict (done_reason
# "length"): the stage takes no score from it ("truncated") and re-asks; the re-ask says 2. Read as
# prose (what audit and the report did before), the first reply says 4.
CUT = '{"explanation": "The assessment is fine.", "score": 4}'
REASKED = '{"explanation": "It misses how often.", "score": 2}'


def _json_replies(request: ChatRequest) -> str | ChatReply:
    if request.format is None:
        return scripted(request)
    if len(request.messages) == 1:
        return ChatReply(text=CUT, done_reason="length", completion_tokens=14)
    return REASKED


@pytest.fixture
def json_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    write_data(tmp_path, ("901",))
    write_params(tmp_path, judge={"output": "json", "max_attempts": 2}, refine={"max_iterations": 1})
    run_pipeline(tmp_path, FakeBackend(_json_replies, name=MODEL), ("assess", "judge"))
    return tmp_path


def test_the_cut_json_reply_read_as_prose_says_otherwise() -> None:
    assert extract_score(CUT, SCALE).score == 4


def test_stage_audit_and_report_read_a_structured_judge_reply_alike(json_project: Path) -> None:
    params = load_paper_params(json_project / "params.yaml")
    [row] = read_jsonl(json_project / params.judge.out, AssessmentJudgements)
    assert {(j.score, j.reading, len(j.call_keys)) for j in row.metrics.values()} == {(2, "json", 2)}

    result = CliRunner().invoke(main, ["audit", "--stage", "judge", "--format", "jsonl"])
    assert result.exit_code == 0, result.stderr
    calls = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(calls) == 2 * len(row.metrics)
    for call in calls:
        score = call["score"]
        if call["context"]["attempt"] == 0:
            assert (score["score"], score["reason"]) == (None, "truncated")
            assert "cut at 14 tokens" in score["error"]
        else:
            assert (score["score"], score["reason"]) == (2, "json")
    text = CliRunner().invoke(main, ["audit", "--stage", "judge", "--metric", "coherence"]).stdout
    assert "--- score: none (truncated: the reply was cut at 14 tokens" in text
    assert "--- score: 2 (json) ---" in text

    records = load_records(Path(params.cache.recordings))
    options = {options_text(record): "options" for record in records.values()}
    builder = ItemBuilder(records, PageTexts(), options, reply_reader(params.judge))
    judged = row.metrics["coherence"]
    views = builder._calls(judged.call_keys, "x", "coherence", judged)
    assert [(v.reading, v.reading_note.split(":")[0]) for v in views] == [
        ("no score", "truncated"),
        ("score 2", "json"),
    ]
