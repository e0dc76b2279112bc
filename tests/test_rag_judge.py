"""The structured judge (pipeline.judges.structured) and the RAG design's step and aggregation."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from pipeline.data.rag_rows import RagRow, load_rag_rows
from pipeline.experiments.rag.aggregation import compute_metrics, markdown_report
from pipeline.experiments.rag.judge import RagJudgement, judge_row, run_rag_judge
from pipeline.experiments.rag.prompt import rag_messages
from pipeline.experiments.rag.settings import RagSettings
from pipeline.judges.likert import to_unit
from pipeline.judges.structured.dimensions import Dimension, Dimensions, reply_model
from pipeline.judges.structured.judge import ScoredDimensions, UnscoredDimensions
from pipeline.llm.session import open_session
from pipeline.llm.settings import EngineSettings, LLMSettings
from pipeline.llm.structured import schema_for
from pipeline.llm.types import ChatReply, ChatRequest, Options, TokenLogprob, TopLogprob
from pipeline.testing.fake_ollama import FakeOllama
from pipeline.testing.structured_responder import structured_ollama_responder, structured_responder
from tests.conftest import ROOT
from tests.helpers import make_session

DIMS = Dimensions(
    (
        Dimension(name="relevance", description="on topic", weight=3.0),
        Dimension(name="accuracy", description="supported", weight=1.0),
    )
)
SETTINGS = RagSettings(dimensions=DIMS, bootstrap_resamples=200)
ROW = RagRow(
    id="r1",
    question="Which port?",
    answer="Port 7070.",
    contexts=("It listens on 7070.",),
    source_ids=("a.md",),
)


def fixed(reply: dict[str, object]) -> str:
    return json.dumps(reply)


def as_written(text: str) -> ChatReply:
    """A reply taken as is: what a model that ignored the schema (or a backend without constrained
    decoding) would send; the fake backend would otherwise constrain it."""
    return ChatReply(text=text, done_reason="stop")


def test_one_to_five_maps_onto_zero_to_one() -> None:
    assert [to_unit(s) for s in (1, 2, 3, 4, 5)] == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_reply_model_orders_reasoning_first_and_allows_only_1_to_5() -> None:
    schema = schema_for(reply_model(DIMS))
    assert list(schema["properties"]) == ["reasoning", "relevance", "accuracy", "confidence"]
    assert schema["properties"]["accuracy"]["enum"] == [1, 2, 3, 4, 5]
    assert schema["additionalProperties"] is False


def test_overall_is_our_weighted_mean_not_the_models(tmp_path: Path) -> None:
    reply = {"reasoning": "ok", "relevance": 5, "accuracy": 1, "confidence": 4}
    session, fake = make_session(tmp_path, stage="rag_judge", responder=lambda r: fixed(reply))
    no_logprobs = SETTINGS.model_copy(update={"logprobs": None})
    result = judge_row(session, ROW, no_logprobs, Options(), "rag_judge").judgement
    assert isinstance(result, ScoredDimensions)
    assert result.dimensions["relevance"].value == 1.0 and result.dimensions["accuracy"].value == 0.0
    assert result.overall == 0.75  # (3 * 1.0 + 1 * 0.0) / 4
    assert result.overall_simple == 0.5
    assert result.confidence == 4 and result.confidence_value == 0.75
    assert result.logprob_confidence is None  # none were asked for
    assert fake.calls[0].format == schema_for(reply_model(DIMS))


def test_a_reply_carrying_its_own_overall_is_refused_not_trusted(tmp_path: Path) -> None:
    reply = {"reasoning": "ok", "relevance": 1, "accuracy": 1, "confidence": 4, "overall_score": 1.0}
    session, _ = make_session(tmp_path, stage="rag_judge", responder=lambda r: as_written(fixed(reply)))
    result = judge_row(session, ROW, SETTINGS, Options(), "rag_judge").judgement
    assert isinstance(result, UnscoredDimensions) and result.kind == "invalid"


def test_an_unreadable_reply_is_a_recorded_failure_never_a_default(tmp_path: Path) -> None:
    session, fake = make_session(
        tmp_path, stage="rag_judge", responder=lambda r: as_written("I think it is fine.")
    )
    result = judge_row(session, ROW, SETTINGS, Options(), "rag_judge").judgement
    assert isinstance(result, UnscoredDimensions)
    assert result.kind == "invalid" and result.text == "I think it is fine."
    assert result.attempts == 2 == len(fake.calls) and len(result.call_keys) == 2
    assert [c.context.attempt for c in session.calls] == [0, 1]
    metrics = compute_metrics([RagJudgement(item="r1", judgement=result, labels={"x": 1})], SETTINGS)
    assert metrics["failed"] == {"invalid": 1} and metrics["scored"] == 0
    assert metrics["dimensions"]["relevance"]["mean"] is None


def test_a_reask_that_validates_is_scored_and_says_so(tmp_path: Path) -> None:
    replies = iter(
        [
            as_written("not json"),
            as_written(fixed({"reasoning": "r", "relevance": 2, "accuracy": 3, "confidence": 1})),
        ]
    )
    session, _ = make_session(tmp_path, stage="rag_judge", responder=lambda r: next(replies))
    result = judge_row(session, ROW, SETTINGS, Options(), "rag_judge").judgement
    assert isinstance(result, ScoredDimensions) and result.attempts == 2 and result.problems == ("invalid",)


def _tokens(text: str, alternatives: dict[str, dict[str, float]]) -> tuple[TokenLogprob, ...]:
    """One token per character; at a digit after a field name, the given alternatives."""
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        prefix = text[:i]
        top: tuple[TopLogprob, ...] = ()
        for name, probs in alternatives.items():
            if ch.isdigit() and prefix.rstrip().endswith(f'"{name}":'):
                top = tuple(TopLogprob(token=t, logprob=math.log(p)) for t, p in probs.items())
        chosen = dict((a.token, a.logprob) for a in top).get(ch, 0.0)
        out.append(TokenLogprob(token=ch, logprob=chosen, top=top))
        i += 1
    return tuple(out)


def test_logprob_confidence_and_expected_score(tmp_path: Path) -> None:
    text = fixed({"reasoning": "r", "relevance": 4, "accuracy": 2, "confidence": 3})
    alternatives = {"relevance": {"4": 0.6, "5": 0.4}, "accuracy": {"2": 0.5, "1": 0.25, "3": 0.25}}

    def responder(request: ChatRequest) -> ChatReply:
        assert request.logprobs == 5
        return ChatReply(text=text, done_reason="stop", logprobs=_tokens(text, alternatives))

    session, _ = make_session(tmp_path, stage="rag_judge", responder=responder)
    result = judge_row(session, ROW, SETTINGS, Options(), "rag_judge").judgement
    assert isinstance(result, ScoredDimensions)
    relevance, accuracy = result.dimensions["relevance"].logprob, result.dimensions["accuracy"].logprob
    assert relevance is not None and accuracy is not None
    assert relevance.chosen_probability == pytest.approx(0.6) and relevance.expected == pytest.approx(4.4)
    assert accuracy.chosen_probability == pytest.approx(0.5) and accuracy.expected == pytest.approx(2.0)
    assert result.logprob_confidence == pytest.approx(0.55)
    assert result.overall_expected == pytest.approx((3 * 0.85 + 1 * 0.25) / 4)


def test_prompt_shows_sources_in_full_or_only_their_ids() -> None:
    full = rag_messages(ROW, DIMS, "full")[1].content
    ids = rag_messages(ROW, DIMS, "ids")[1].content
    assert "It listens on 7070." in full and "a.md" in full
    assert "It listens on 7070." not in ids and "a.md" in ids
    cut = rag_messages(ROW.model_copy(update={"contexts": ("x" * 500,)}), DIMS, "full", 100)[1].content
    assert "x" * 100 + "\n[... 400 more characters not shown]" in cut


def test_judge_over_the_fake_ollama_server(tmp_path: Path) -> None:
    rows = load_rag_rows(ROOT / "data" / "rag-demo" / "rows.jsonl")
    with FakeOllama(responder=structured_ollama_responder, parallel_slots=4) as server:
        settings = LLMSettings(backend="ollama", base_url=server.url, model="test-model", parallelism=4)
        session = open_session(EngineSettings(llm=settings), "rag_judge", root=tmp_path)
        results = run_rag_judge(session, rows, SETTINGS, Options())
        assert server.requests_to("/api/chat") == len(rows)
        # The last chat request (a digest check of /api/tags may follow it since issue 28).
        sent = [r for r in server.received if r.path == "/api/chat"][-1].body
        session.close()
    assert sent["format"] == schema_for(reply_model(DIMS))
    assert all(isinstance(r.judgement, ScoredDimensions) for r in results)
    assert [r.item for r in results] == [r.id for r in rows]


def test_agreement_and_confidence_tables() -> None:
    def verdict(score: int, confidence: int) -> ScoredDimensions:
        from pipeline.judges.structured.judge import DimensionScore

        dims = {n: DimensionScore(score=score, value=to_unit(score)) for n in DIMS.names}
        return ScoredDimensions(
            reasoning="r",
            dimensions=dims,
            overall=to_unit(score),
            overall_simple=to_unit(score),
            confidence=confidence,
            confidence_value=to_unit(confidence),
            attempts=1,
            call_keys=("k",),
        )

    # Label 1 rows score high, label 0 rows low, except two confident-looking mistakes.
    judged = [
        RagJudgement(
            item=f"i{i}", judgement=verdict(5 if i % 2 else 1, 5), labels={"answer_relevance": i % 2}
        )
        for i in range(16)
    ] + [
        RagJudgement(item="x1", judgement=verdict(1, 1), labels={"answer_relevance": 1}),
        RagJudgement(item="x2", judgement=verdict(5, 1), labels={"answer_relevance": 0}),
    ]
    settings = SETTINGS.model_copy(update={"label_scores": {"answer_relevance": "relevance"}})
    metrics = compute_metrics(judged, settings)
    auroc = metrics["agreement"]["answer_relevance"]["scores"]["relevance"]["auroc"]
    # 9 x 9 pairs: 64 won, 16 tied with a mistake (half each), the two mistakes against each other lost
    assert auroc["value"] == pytest.approx(72 / 81, abs=1e-4)
    assert auroc["low"] <= auroc["value"] <= auroc["high"]
    ba = metrics["agreement"]["answer_relevance"]["scores"]["overall"]["balanced_accuracy"]
    assert ba["fit_rows"] + ba["eval_rows"] == 18
    confidence = metrics["confidence_vs_disagreement"]["answer_relevance"]
    assert confidence["agree"] == 16 and confidence["disagree"] == 2
    assert confidence["self_reported"]["value"] == 1.0  # the only unsure rows are the mistakes
    assert confidence["logprob"] is None
    assert "| relevance |" in markdown_report(metrics, "fake:m")


def test_report_page_shows_each_row_escaped_with_its_exact_prompt(tmp_path: Path) -> None:
    from pipeline.data.recorded_calls import recorded_calls
    from pipeline.experiments.rag.report import render_rag_html

    row = ROW.model_copy(update={"answer": "<script>alert(1)</script> Port 7070."})
    session, _ = make_session(tmp_path, stage="rag_judge", responder=structured_responder)
    judged = run_rag_judge(session, [row], SETTINGS, Options())
    session.close()
    calls = recorded_calls(tmp_path / "recordings" / "rag_judge", verify=False)
    page = render_rag_html(
        [row], judged, compute_metrics(judged, SETTINGS), calls, SETTINGS, "t", Path("r.html")
    )
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "It listens on 7070." in page  # the prompt as sent
    verdict = judged[0].judgement
    assert isinstance(verdict, ScoredDimensions) and verdict.reasoning in page
