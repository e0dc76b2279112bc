"""`judgeloop audit` shows, for every judge call of every design, the reading its stage made of the
reply (Design.reads): checked here against each stage's own results file, on the committed recorded
runs (the embedded model's real replies: structured ones with log-probabilities, truncated ones,
re-asks). Each expectation is built from the results alone, so a reader other than the stage's (the
prose extractor, a reading that ignores done_reason, another mapping to 0-1) fails it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pipeline.experiments.registry import designs
from pipeline.judges.rubric.judge import SCALE
from pipeline.judges.scores import extract_score
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import CallContext, ChatReply, ChatRequest, Message, ModelIdentity, Options
from pipeline.tools.audit.formats import readers, score_of
from pipeline.tools.cli import main

ROOT = Path(__file__).resolve().parent.parent
# key -> (score, reason, fields, weighted): the reading the results file says the stage made
Expected = dict[str, tuple[Any, str, dict[str, Any], dict[str, float]]]


def audited(*stages: str) -> dict[str, dict[str, Any]]:
    """key -> the audit's reading of every call of these stages in the committed run (jsonl)."""
    args = ["audit", "--format", "jsonl"] + [f"--stage={s}" for s in stages]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    calls = [json.loads(line) for line in result.stdout.splitlines()]
    return {c["key"]: c for c in calls}


@pytest.fixture(autouse=True)
def _in_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def rows(path: str) -> Iterator[dict[str, Any]]:
    for line in (ROOT / path).read_text(encoding="utf-8").splitlines():
        yield json.loads(line)


def reading(call: dict[str, Any]) -> tuple[Any, str, dict[str, Any], dict[str, float]]:
    score = call["score"]
    assert score is not None, f"{call['key']}: audit shows no reading for a judge call"
    return score["score"], score["reason"], score.get("fields", {}), score.get("weighted", {})


def check(calls: dict[str, dict[str, Any]], last: Expected, before: dict[str, str]) -> None:
    """Every call the results name is read as they say: the last call of a judgement as its value,
    each earlier attempt unscored with the problem the results list; and every call the audit reads
    is one the results name (no judge call left out of the comparison)."""
    assert last, "the results name no judge call"
    for key, expected in last.items():
        assert reading(calls[key]) == expected, key
    for key, problem in before.items():
        assert reading(calls[key])[:2] == (None, problem), key
    read = {key for key, call in calls.items() if call["score"] is not None}
    assert read == set(last) | set(before)


def test_every_design_with_judge_calls_says_how_it_reads_them() -> None:
    assert {d.name for d in designs() if d.reads is None} == set()


def test_paper_audit_reads_each_judge_call_as_the_judge_and_refine_stages_did() -> None:
    last: Expected = {}
    before: dict[str, str] = {}

    def judged(metric: dict[str, Any]) -> None:
        weighted = {} if metric["weighted_score"] is None else {"score": metric["weighted_score"]}
        last[metric["call_keys"][-1]] = (metric["score"], metric["reading"], {}, weighted)
        # The paper's results keep no problem per attempt: an earlier attempt gave no score.
        before.update((key, "") for key in metric["call_keys"][:-1])

    for row in rows("outputs/paper/judgements.jsonl"):
        for metric in row["metrics"].values():
            judged(metric)
    for row in rows("outputs/paper/refinement.jsonl"):
        for iteration in row["iterations"]:
            for metric in iteration["metrics"].values():
                if not metric.get("carried_over"):
                    judged(metric)
    calls = audited("judge", "refine")
    assert any(w for _, _, _, w in last.values())  # the committed run has G-Eval's weighted scores
    for key in before:
        assert reading(calls[key])[0] is None, key
    check(calls, last, {k: reading(calls[k])[1] for k in before})


def test_rag_audit_reads_each_judge_call_as_rag_judge_did() -> None:
    last: Expected = {}
    before: dict[str, str] = {}
    for row in rows("outputs/rag/judgements.jsonl"):
        j = row["judgement"]
        keys = j["call_keys"]
        before.update(zip(keys[:-1], j["problems"], strict=False))
        if j["status"] == "failed":
            last[keys[-1]] = (None, j["kind"], {}, {})
            continue
        fields = {name: d["score"] for name, d in j["dimensions"].items()} | {"confidence": j["confidence"]}
        weighted = {name: d["logprob"]["expected"] for name, d in j["dimensions"].items() if d["logprob"]}
        last[keys[-1]] = (j["overall"], "json", fields, weighted)
    check(audited("rag_judge"), last, before)


def test_summeval_audit_reads_each_judge_call_as_summeval_judge_did() -> None:
    calls = audited("summeval_judge")
    # The results keep no call keys: a row is the summary and dimension, its last call the attempt
    # numbered attempts - 1.
    by_ask = {
        (c["context"]["item"], c["context"]["labels"]["metric"], c["context"]["attempt"]): key
        for key, c in calls.items()
    }
    last: Expected = {}
    before: dict[str, str] = {}
    for row in rows("outputs/summeval/judgements.jsonl"):
        key = by_ask[(row["item"], row["dimension"], row["attempts"] - 1)]
        weighted = {} if row["weighted_score"] is None else {"score": row["weighted_score"]}
        last[key] = (row["score"], row["failure"] or "json", {}, weighted)
        for attempt in range(row["attempts"] - 1):
            earlier = by_ask[(row["item"], row["dimension"], attempt)]
            before[earlier] = reading(calls[earlier])[1]
    check(calls, last, before)


def _evaluated(answer: dict[str, Any], last: Expected) -> None:
    keys = answer["calls"]["keys"]
    if not keys:
        return
    if answer["evaluation"] is None:
        last[keys[-1]] = (None, answer["failure"].split(":")[0], {}, {})
        return
    grades = {name: answer["evaluation"][name] for name in ("quality_score", "confidence_score")}
    last[keys[-1]] = (answer["quality"], "json", grades, {})


def test_regen_audit_reads_each_evaluation_as_its_stage_did() -> None:
    last: Expected = {}
    for row in rows("outputs/regen/evaluated.jsonl"):
        _evaluated(row, last)
    for row in rows("outputs/regen/regenerated.jsonl"):
        for answer in row["attempts"][1:]:
            _evaluated(answer, last)
    calls = audited("regen_evaluate", "regen_regenerate", "regen_generate")
    before = {
        key: reading(calls[key])[1]
        for key, call in calls.items()
        if call["context"]["labels"].get("role") == "evaluate" and key not in last
    }
    assert all(reading(calls[key])[0] is None for key in before)
    check(calls, last, before)


def test_selection_audit_reads_each_rating_and_comparison_as_its_stage_did() -> None:
    last: Expected = {}
    tried: set[str] = set()
    for row in rows("outputs/selection/scores.jsonl"):
        for candidate in row["pool"]:
            for score in candidate["scores"].values():
                if score["source"] == "judge":
                    last[score["call_keys"][-1]] = (score["score"], "json", {"rating": score["rating"]}, {})
                    tried.update(score["call_keys"][:-1])
            for failed in candidate["failed"].values():
                last[failed["call_keys"][-1]] = (None, failed["kind"], {}, {})
                tried.update(failed["call_keys"][:-1])
    for row in rows("outputs/selection/picks.jsonl"):
        for c in row["comparisons"]:
            if c["failure"] is None:
                last[c["call_keys"][-1]] = (c["winner"], "json", {}, {})
            else:
                last[c["call_keys"][-1]] = (None, c["failure"].split(":")[0], {}, {})
            tried.update(c["call_keys"][:-1])
    calls = audited("select_score", "select_pick")
    assert any(r[0] is None for r in last.values())  # the committed run has unscored ratings
    assert all(reading(calls[key])[0] is None for key in tried)
    check(calls, last, {key: reading(calls[key])[1] for key in tried})


def _call(stage: str, text: str, done_reason: str = "stop", **labels: str) -> RecordedCall:
    request = ChatRequest(
        messages=(Message(role="user", content="rate it"),), options=Options(), format={"type": "object"}
    )
    reply = ChatReply(text=text, done_reason=done_reason, completion_tokens=9)
    record = CallRecord.new(ModelIdentity(backend="fake", name="m", digest="d"), request, reply)
    return RecordedCall(CallContext(stage=stage, item="i1", labels=labels), record)


JUDGE_CALLS = {
    "judge": {"role": "judge", "metric": "coherence"},
    "refine": {"role": "judge", "metric": "accuracy"},
    "rag_judge": {"prompt": "full"},
    "summeval_judge": {"metric": "coherence"},
    "regen_evaluate": {"role": "evaluate"},
    "regen_regenerate": {"role": "evaluate"},
    "select_score": {"candidate": "t1", "criterion": "mood"},
    "select_pick": {"candidate": "t1", "order": "t1>t2"},
}


@pytest.mark.parametrize("stage", sorted(JUDGE_CALLS))
def test_a_cut_reply_is_unscored_in_audit_for_every_design_though_it_reads_as_a_score(stage: str) -> None:
    """Every design's reader, found through the registry as audit finds it, reads a reply cut by
    num_predict as the stage did: no score, `truncated`, though its text holds a whole score."""
    text = '{"score": 4, "rating": 4, "quality_score": 4}'
    assert extract_score(text, SCALE).score == 4  # what the prose extractor would show
    reading = score_of(_call(stage, text, "length", **JUDGE_CALLS[stage]), readers(None))
    assert reading is not None and (reading.score, reading.reason) == (None, "truncated")


def test_a_call_that_is_no_judge_call_has_no_reading() -> None:
    read = readers(None)
    for stage, labels in (("regen_generate", {"role": "generate"}), ("assess", {"role": "assess"})):
        assert score_of(_call(stage, "Score: 4", **labels), read) is None
