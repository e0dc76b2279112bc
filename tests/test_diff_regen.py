"""`judgeloop diff` on the regeneration design (seed 004): its judgement unit is the evaluator's
judgement of one row's answer at one attempt, on quality (verdict: at or above the policy's
threshold) and confidence. Pairs of runs differing in one thing each (the model, the evaluator's
prompt, the answers judged) are recorded with a fake model whose grades depend on exactly what it is
asked; every change must be blamed on that one thing, and the counts must equal a count made from
the two runs' recordings directly (each evaluation's last attempt, its grades read by hand)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipeline.data.jsonl import write_jsonl
from pipeline.data.rag_rows import RagRow
from pipeline.experiments.regen.evaluate import run_evaluate
from pipeline.experiments.regen.generate import run_generate
from pipeline.experiments.regen.params import RegenParams, load_rows
from pipeline.experiments.regen.regenerate import run_regenerate
from pipeline.judges.quality import evaluator
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.recordings import stage_reader
from pipeline.llm.recordings.stage_reader import LoadedCall
from pipeline.llm.types import ChatReply, ChatRequest
from tests import diff_runs
from tests.diff_runs import assert_counted_as_recorded, last_replies
from tests.helpers import make_session

ROWS = [
    RagRow(id=f"r{i}", question=f"Question {i}?", answer=f"Given answer {i}.", contexts=(f"Passage {i}.",))
    for i in range(8)
]


def _grade(*parts: str) -> int:
    return 1 + int(hashlib.sha256("|".join(parts).encode()).hexdigest()[:8], 16) % 5


def responder(model: str) -> Callable[[ChatRequest], ChatReply]:
    """Answers that depend on the row and on being a regeneration, never on the model; grades
    that depend on the evaluator's whole question, and on the model where it ends in -b."""

    def reply(request: ChatRequest) -> ChatReply:
        text = "\n".join(m.content for m in request.messages)
        row = next(r.id for r in ROWS if f"Question {r.id[1:]}?" in text)
        if request.format is None:  # the generator
            text = f"{'better ' if 'IMPORTANT' in text else ''}answer {row}"
            return ChatReply(text=text, meta={"total_duration": 1_000_000})  # timed: the files are the same
        salt = (model,) if model.endswith("-b") else ()
        body = {
            "issues": [],
            "improvement_hint": "Quote the passage.",
            "quality_score": _grade(*salt, "quality", text),
            "confidence_score": _grade(*salt, "confidence", text),
        }
        return ChatReply(text=json.dumps(body), done_reason="stop", meta={"total_duration": 1_000_000})

    return reply


def record(
    root: Path,
    model: str,
    *,
    respond: Callable[[ChatRequest], ChatReply] | None = None,
    llm: dict[str, Any] | None = None,
    **sections: dict[str, Any],
) -> Path:
    """generate -> evaluate -> regenerate as the stages run them, outputs where params put them
    (with recordings already in root/recordings, a replay of them)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "rows.jsonl").write_text("".join(row.model_dump_json() + "\n" for row in ROWS))
    data = {
        "llm": {"backend": "fake", "model": model, **(llm or {})},
        "regen_generate": {"rows": "rows.jsonl", **sections.get("regen_generate", {})},
        "regen_evaluate": sections.get("regen_evaluate", {}),
        "regenerate": {"enabled": True, "latency_budget_s": None, **sections.get("regenerate", {})},
    }
    (root / "params.yaml").write_text(yaml.safe_dump(data))
    params = RegenParams.model_validate(data)
    rows = load_rows(params, root)
    by_id = {row.id: row for row in rows}
    backend = FakeBackend(respond or responder(model), name=model)
    with closing(make_session(root, stage="regen_generate", backend=backend)[0]) as session:
        answers = run_generate(params, session, rows)
    with closing(make_session(root, stage="regen_evaluate", backend=backend)[0]) as session:
        evaluated = run_evaluate(params, session, by_id, answers)
    with closing(make_session(root, stage="regen_regenerate", backend=backend)[0]) as session:
        regenerated = run_regenerate(params, session, by_id, evaluated)
    write_jsonl(root / params.regen_evaluate.out, evaluated)
    write_jsonl(root / params.regenerate.out, regenerated)
    return root


def graded(root: Path) -> dict[tuple[str, int, str], int]:
    """Each evaluation's grades as its last attempt's reply states them, from the recordings:
    attempt 0 is the evaluate stage's call, attempt n the regenerate stage's at step n."""

    def evaluation(loaded: LoadedCall) -> tuple[str, int] | None:
        context = loaded.call.context
        if context.label("role") != "evaluate" or context.step is None:
            return None
        return (context.item, context.step)

    grades: dict[tuple[str, int, str], int] = {}
    for (item, step), text in last_replies(stage_reader.read_all(root / "recordings"), evaluation).items():
        reply = json.loads(text)
        grades[(item, step, "quality")] = reply["quality_score"]
        grades[(item, step, "confidence")] = reply["confidence_score"]
    return grades


def diff_json(a: Path, b: Path) -> dict[str, Any]:
    return diff_runs.diff_json(a, b, "regen")


def _all_blamed_on(found: dict[str, Any], cause: str, a: Path, b: Path) -> None:
    assert found["changes"], "the two runs should differ somewhere"
    assert {c["cause"] for c in found["changes"]} == {cause}, [
        (c["item"], c["iteration"], c["metric"], c["cause"], c["detail"]) for c in found["changes"]
    ]
    assert_counted_as_recorded(found, cause, graded(a), graded(b), lambda k: k[2])
    assert {m["metric"] for m in found["metrics"]} == {"quality", "confidence"}


def _flips(found: dict[str, Any], a: Path, b: Path, threshold: float) -> None:
    """Across the threshold: a grade g passes where (g - 1) / 4 >= threshold."""
    old, new = graded(a), graded(b)
    common = [k for k in old.keys() & new.keys() if k[2] == "quality"]
    passed = {side: {k: (g[k] - 1) / 4 >= threshold for k in common} for side, g in (("a", old), ("b", new))}
    quality = next(m for m in found["metrics"] if m["metric"] == "quality")
    assert quality["flipped"]["pass_to_fail"] == sum(passed["a"][k] and not passed["b"][k] for k in common)
    assert quality["flipped"]["fail_to_pass"] == sum(passed["b"][k] and not passed["a"][k] for k in common)


@pytest.fixture
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record(tmp_path_factory.mktemp("runs") / "a", "judge-a")


def test_a_new_model_is_blamed_for_every_changed_evaluation(baseline: Path, tmp_path: Path) -> None:
    other = record(tmp_path / "b", "judge-b")
    found = diff_json(baseline, other)
    _all_blamed_on(found, "model", baseline, other)
    _flips(found, baseline, other, 0.4)
    quality = next(m for m in found["metrics"] if m["metric"] == "quality")
    assert quality["flipped"]["pass_to_fail"] + quality["flipped"]["fail_to_pass"] > 0


def test_a_new_evaluator_prompt_is_blamed_for_every_change(
    baseline: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(evaluator, "EVALUATE_SYSTEM", evaluator.EVALUATE_SYSTEM + "\nBe strict.")
    other = record(tmp_path / "b", "judge-a")
    found = diff_json(baseline, other)
    _all_blamed_on(found, "prompt", baseline, other)
    assert {c["detail"] for c in found["changes"]} == {"message 1 (system): +1 −0 lines"}


def test_other_answers_are_blamed_on_the_judged_input(baseline: Path, tmp_path: Path) -> None:
    other = record(tmp_path / "b", "judge-a", regen_generate={"answers": "given"})
    found = diff_json(baseline, other)
    _all_blamed_on(found, "input", baseline, other)


def test_a_new_threshold_flips_verdicts_with_the_same_grades(baseline: Path, tmp_path: Path) -> None:
    """Quality's verdict is the policy's: a higher threshold fails what passed, the grades unmoved.
    (The regenerations it adds are judgements of run B only.)"""
    other = record(tmp_path / "b", "judge-a", regenerate={"threshold": 0.9})
    found = diff_json(baseline, other)
    quality = next(m for m in found["metrics"] if m["metric"] == "quality")
    old = graded(baseline)
    assert quality["flipped"]["pass_to_fail"] == sum(
        1 for k, g in old.items() if k[2] == "quality" and 0.4 <= (g - 1) / 4 < 0.9
    )
    assert quality["flipped"]["fail_to_pass"] == 0 and quality["flipped"]["pass_to_fail"] > 0
    assert {c["cause"] for c in found["changes"]} == {"threshold"}
    assert quality["only_in_b"] > 0
