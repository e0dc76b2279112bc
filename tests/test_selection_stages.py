"""The selection experiment's LLM steps: scoring, failures, pairwise tie-breaks, traceable explanations."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from tenacity import wait_none

from pipeline.data.catalog import load_catalog
from pipeline.data.jsonl import read_records
from pipeline.experiments.selection.files import PICKS, SCORES
from pipeline.experiments.selection.judging import RatingReply
from pipeline.experiments.selection.report import render_selection_page
from pipeline.llm.backends.ollama import OllamaBackend
from pipeline.llm.recordings.stage_reader import read_all, read_stage
from pipeline.llm.records import RecordedCall
from pipeline.llm.settings import LLMSettings
from pipeline.llm.types import ChatRequest, Message
from pipeline.testing.fake_ollama import FakeOllama
from tests.selection_run import (
    ROOT,
    always_a,
    by_name,
    digest_rating,
    judge,
    run_selection,
    selection_params,
    track_names,
)
from tests.selection_trace import check_traceable

CATALOG = ROOT / "data/selection/catalog_fictional.csv"


def recorded(root: Path, stage: str) -> list[RecordedCall]:
    return [loaded.call for loaded in read_stage(root / "recordings" / stage)]


def test_every_judged_criterion_is_one_recorded_structured_call(tmp_path: Path) -> None:
    scored, _, metrics = run_selection(tmp_path, selection_params())
    calls = {c.record.key: c for c in recorded(tmp_path, "select_score")}
    judged = 0
    for request in scored:
        for candidate in request.pool:
            for name, criterion in request.framework.criteria.items():
                score = candidate.scores[name]
                if criterion.source == "attribute":
                    assert score.call_keys == () and score.attribute_value is not None
                    continue
                judged += 1
                (key,) = score.call_keys
                call = calls[key]
                assert call.record.request.format is not None  # schema-constrained
                assert call.context.labels == {"candidate": candidate.id, "criterion": name}
                rating = RatingReply.model_validate_json(call.record.reply.text).rating
                assert score.rating == rating and score.score == (rating - 1) / 4
                assert candidate.reasons[name] == "It fits."
    assert judged == metrics["judgements"]["scored"] == len(calls) > 0
    assert metrics["judgements"]["failed"] == 0


def rambles_about(victim: str) -> Any:
    """Rates every track, but rambles past num_predict about `victim`, every time it is asked."""

    def respond(request: ChatRequest) -> str:
        if track_names(request) == [victim]:
            return json.dumps({"reason": "and so on " * 200, "rating": 5})
        return judge()(request)

    return respond


def test_a_failed_judgement_is_recorded_and_excludes_the_candidate_never_a_default(tmp_path: Path) -> None:
    params = selection_params(limit=1)
    clean, _, _ = run_selection(tmp_path / "clean", params)
    victim = clean[0].pool[0]
    scored, picks, metrics = run_selection(
        tmp_path / "run", params, rambles_about(victim.entry.track.track_name)
    )
    failing = scored[0].pool[0]
    assert failing.id == victim.id
    judged = {n for n, c in scored[0].framework.criteria.items() if c.source == "judge"}
    assert set(failing.failed) == judged and judged.isdisjoint(failing.scores)
    for failure in failing.failed.values():
        assert failure.kind == "truncated" and len(failure.call_keys) == 2  # asked, re-asked, given up
    selection = picks[0]["selection"]
    assert selection["excluded"] == {victim.id: sorted(judged)}
    assert victim.id not in [row["candidate"] for row in selection["ranking"]]
    assert victim.id not in selection["picks"]
    assert metrics["judgements"]["failed"] == len(judged)
    assert metrics["judgements"]["excluded_candidates"] == 1
    assert metrics["judgements"]["failed_by_kind"] == {"truncated": len(judged)}


def test_near_ties_are_asked_in_both_orders_and_a_position_biased_judge_is_caught(tmp_path: Path) -> None:
    params = selection_params(tie_margin=0.2)
    scored, picks, consistent = run_selection(tmp_path / "fair", params, judge(digest_rating, by_name))
    names = {c.id: c.entry.track.track_name for r in scored for c in r.pool}
    _, biased_picks, biased = run_selection(tmp_path / "biased", params, judge(digest_rating, always_a))
    assert consistent["pairwise"]["near_ties"] > 0
    assert consistent["pairwise"]["comparisons"] == 2 * consistent["pairwise"]["near_ties"]
    assert consistent["pairwise"]["position_consistency"] == 1.0
    assert biased["pairwise"]["position_consistency"] == 0.0
    assert biased["pairwise"]["flipped"] == biased["pairwise"]["near_ties"]
    assert biased["pairwise"]["tie_breaks"] == 0
    for pick in picks:
        for comparison in pick["comparisons"]:
            preferred = min(comparison["first"], comparison["second"], key=lambda cid: (names[cid], cid))
            assert comparison["winner"] == preferred
        orders = {(c["first"], c["second"]) for c in pick["comparisons"]}
        assert all((second, first) in orders for first, second in orders)
    for pick in biased_picks:
        assert all(o["status"] == "flipped" for o in pick["outcomes"])
        assert all(not e["pairwise_won"] for e in pick["explanations"])
    calls = recorded(tmp_path / "fair", "select_pick")
    assert {c.context.labels["order"] for c in calls} == {
        f"{c['first']}>{c['second']}" for p in picks for c in p["comparisons"]
    }


def test_every_number_in_an_explanation_traces_to_a_recorded_call(tmp_path: Path) -> None:
    scored, picks, metrics = run_selection(tmp_path, selection_params(tie_margin=0.2))
    calls = {loaded.call.record.key: loaded.call for loaded in read_all(tmp_path / "recordings")}
    records = [s.record() for s in scored]
    catalog = {
        t.track_id: t.model_dump() for t in load_catalog(ROOT / "data/selection/catalog_fictional.csv")
    }
    assert check_traceable(records, picks, calls, catalog) > 0
    assert any(e["pairwise_won"] for p in picks for e in p["explanations"])
    # The check is not vacuous: one rating changed in the outputs no longer traces.
    tampered = copy.deepcopy(picks)
    judged = next(c for c in tampered[0]["explanations"][0]["criteria"] if c["source"] == "judge")
    judged["rating"] = judged["rating"] % 5 + 1
    with pytest.raises(AssertionError, match="rating"):
        check_traceable(records, tampered, calls, catalog)
    page = render_selection_page("run", Path("report.html"), metrics, records, picks)
    assert all(e["candidate"] in page for p in picks for e in p["explanations"])


def test_the_committed_demo_traces_to_its_recordings() -> None:
    if not (ROOT / SCORES).exists() or not (ROOT / PICKS).exists():
        pytest.skip("no committed selection demo (dvc repro select_aggregate writes it)")
    calls = {loaded.call.record.key: loaded.call for loaded in read_all(ROOT / "recordings")}
    catalog = {
        t.track_id: t.model_dump() for t in load_catalog(ROOT / "data/selection/catalog_fictional.csv")
    }
    assert check_traceable(read_records(ROOT / SCORES), read_records(ROOT / PICKS), calls, catalog) > 0


def test_scoring_over_http_against_the_fake_ollama_server(tmp_path: Path) -> None:
    def respond(body: dict[str, Any]) -> str:
        messages = tuple(Message(role=m["role"], content=m["content"]) for m in body["messages"])
        return judge()(ChatRequest(messages=messages))

    with FakeOllama(responder=respond) as server:

        def backend() -> OllamaBackend:
            return OllamaBackend(LLMSettings(base_url=server.url, model="test-model"), wait=wait_none())

        scored, picks, metrics = run_selection(tmp_path, selection_params(limit=1), backend=backend)
        chats = [r.body for r in server.received if r.path == "/api/chat"]
        assert chats and all(isinstance(body["format"], dict) for body in chats)
    assert metrics["judgements"]["scored"] > 0 and metrics["judgements"]["failed"] == 0
    calls = {loaded.call.record.key: loaded.call for loaded in read_all(tmp_path / "recordings")}
    assert check_traceable([s.record() for s in scored], picks, calls) > 0


def test_the_page_shows_the_judges_words_as_text_never_markup(tmp_path: Path) -> None:
    def sly(request: ChatRequest) -> str:
        if len(track_names(request)) == 1:
            return json.dumps({"reason": "<script>alert(1)</script>", "rating": 4})
        return by_name(request)

    scored, picks, metrics = run_selection(tmp_path, selection_params(limit=1), sly)
    page = render_selection_page("run", Path("report.html"), metrics, [s.record() for s in scored], picks)
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("<script>") == 1  # the page's own, under its Content-Security-Policy
