"""regen_evaluate.samples: the evaluator's judge.samples. Each answer evaluated N times, sample i with
the seed derived from llm.options.seed and i, its grades combined by regen_evaluate.combine; with one
sample, exactly the requests and files of before. `judgeloop diff` reports the evaluator's stability."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from pipeline.judges.likert import to_unit
from pipeline.judges.samples import combine, sample_seed
from pipeline.llm.recordings import stage_reader
from pipeline.llm.types import ChatReply, ChatRequest
from pipeline.tools.cli import main
from tests.test_diff_regen import ROWS, record, responder

OUTPUTS = ("outputs/regen/evaluated.jsonl", "outputs/regen/regenerated.jsonl")
SAMPLED = {"options": {"temperature": 0.7, "seed": 7}}


def seeded(request: ChatRequest) -> ChatReply:
    """The diff tests' fake model; at temperature > 0 its grades move with the seed."""
    reply = responder("judge-a")(request)
    if request.format is None or request.options.temperature == 0:
        return reply
    body = json.loads(reply.text)
    shift = hashlib.sha256(str(request.options.seed).encode()).digest()[0] % 3 - 1
    body["quality_score"] = min(5, max(1, body["quality_score"] + shift))
    return reply.model_copy(update={"text": json.dumps(body)})


def _no_model(request: ChatRequest) -> ChatReply:
    pytest.fail("a replay asked the model")


def evaluations(root: Path) -> list[Any]:
    return [
        loaded.call
        for loaded in stage_reader.read_all(root / "recordings")
        if loaded.call.context.label("role") == "evaluate"
    ]


def test_one_sample_makes_exactly_the_requests_and_files_of_before(tmp_path: Path) -> None:
    record(tmp_path / "default", "judge-a")
    record(tmp_path / "one", "judge-a", regen_evaluate={"samples": 1, "combine": "majority"})
    for name in OUTPUTS:
        assert (tmp_path / "default" / name).read_bytes() == (tmp_path / "one" / name).read_bytes()
        assert b'"samples"' not in (tmp_path / "one" / name).read_bytes()
    keys = [sorted(c.record.key for c in evaluations(tmp_path / d)) for d in ("default", "one")]
    assert keys[0] == keys[1] and keys[0]


def _rows(root: Path) -> list[dict[str, Any]]:
    lines = (root / "outputs/regen/evaluated.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _sampled_with_seeds(calls: list[Any], one_sample: list[Any]) -> None:
    """Each evaluation asked once per sample with its seed; sample 0 the call a one-sample run makes."""
    seeds: dict[tuple[Any, ...], dict[str, int]] = {}
    for call in (c for c in calls if c.context.attempt == 0):
        question = (call.context.stage, call.context.item, call.context.step)
        seeds.setdefault(question, {})[str(call.context.label("sample"))] = call.record.request.options.seed
    assert seeds and all(
        s == {"0": 7, "1": sample_seed(7, 1), "2": sample_seed(7, 2)} for s in seeds.values()
    )
    one = {c.record.key for c in one_sample if (c.context.stage, c.context.attempt) == ("regen_evaluate", 0)}
    zero = {
        c.record.key
        for c in calls
        if (c.context.stage, c.context.label("sample"), c.context.attempt) == ("regen_evaluate", "0", 0)
    }
    assert zero and zero == one  # sample 0 is the call a one-sample run makes


def _diff_shows_stability(one: Path, three: Path) -> None:
    result = CliRunner().invoke(main, ["diff", str(one), str(three), "--design", "regen", "--json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    quality = next(m for m in found["metrics"] if m["metric"] == "quality")
    shown = quality["stability"]["B"]
    regenerated = [
        a["samples"]
        for line in (three / "outputs/regen/regenerated.jsonl").read_text().splitlines()
        for a in json.loads(line)["attempts"]
    ]
    assert shown["judgements"] == len(regenerated)
    sd = float(np.mean([np.std(s, ddof=1) for s in regenerated]))
    assert shown["within_sd"] == pytest.approx(sd, abs=1e-4)
    assert shown["straddle_share"] is None


def test_three_samples_seeded_combined_replayed_and_diffed(tmp_path: Path) -> None:
    record(tmp_path / "one", "judge-a", respond=seeded, llm=SAMPLED)
    three = record(tmp_path / "three", "judge-a", respond=seeded, llm=SAMPLED, regen_evaluate={"samples": 3})
    _sampled_with_seeds(evaluations(three), evaluations(tmp_path / "one"))

    rows = _rows(three)
    assert len(rows) == len(ROWS) and all(len(r["samples"]) == 3 for r in rows)
    grades = [[round(s * 4 + 1) for s in r["samples"]] for r in rows]
    assert [r["quality"] for r in rows] == [to_unit(combine(g, "mean") or 0) for g in grades]
    assert any(len(set(g)) > 1 for g in grades)  # they do differ

    replayed = tmp_path / "replayed"  # from the recordings alone: no model call, the same files
    shutil.copytree(three / "recordings", replayed / "recordings")
    record(replayed, "judge-a", respond=_no_model, llm=SAMPLED, regen_evaluate={"samples": 3})
    for name in OUTPUTS:
        assert (replayed / name).read_bytes() == (three / name).read_bytes()

    _diff_shows_stability(tmp_path / "one", three)
