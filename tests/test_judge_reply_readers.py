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
from pipeline.llm.types import ChatRequest
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
