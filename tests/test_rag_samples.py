"""rag.samples: the RAG judge's judge.samples. Each row judged N times, sample i with the seed derived
from llm.options.seed and i, each dimension's score the samples' majority; with one sample, exactly
the requests and files of before. `judgeloop diff` reports the judge's stability per dimension."""

from __future__ import annotations

import hashlib
import json
import shutil
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from pipeline.data.jsonl import write_jsonl
from pipeline.data.rag_rows import RagRow
from pipeline.experiments.rag.judge import run_rag_judge
from pipeline.experiments.rag.params import RagParams
from pipeline.judges.samples import combine, sample_seed
from pipeline.judges.structured.judge import ScoredDimensions
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.recordings import stage_reader
from pipeline.llm.settings import CacheMode
from pipeline.llm.types import ChatReply, ChatRequest
from pipeline.tools.cli import main
from tests.helpers import make_session

ROWS = [
    RagRow(id=f"r{i}", question=f"Question {i}?", answer=f"Answer {i}.", contexts=(f"Passage {i}.",))
    for i in range(6)
]
DIMENSIONS = [
    {"name": "relevance", "description": "on topic", "weight": 3.0},
    {"name": "accuracy", "description": "supported", "weight": 1.0},
]
SAMPLED = {"temperature": 0.7, "seed": 7}


def _grade(*parts: object) -> int:
    return 1 + int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:8], 16) % 5


def seeded(request: ChatRequest) -> ChatReply:
    """Scores of the question; at temperature > 0 they move with the seed, as sampling does."""
    text = "\n".join(m.content for m in request.messages)
    salt = request.options.seed if request.options.temperature > 0 else ""
    reply = {
        "reasoning": "ok",
        "relevance": _grade("relevance", text, salt),
        "accuracy": _grade("accuracy", text, salt),
        "confidence": _grade("confidence", text),
    }
    return ChatReply(text=json.dumps(reply), done_reason="stop")


def _no_model(request: ChatRequest) -> ChatReply:
    pytest.fail("a replay asked the model")


def record(root: Path, options: dict[str, Any] | None = None, respond: Any = seeded, **rag: Any) -> Path:
    """The rag_judge stage in-process: params.yaml, recordings/rag_judge/, the judgements file."""
    root.mkdir(parents=True, exist_ok=True)
    data = {
        "llm": {"backend": "fake", "options": options or {}},
        "rag": {"rows": "rows.jsonl", "dimensions": DIMENSIONS, "logprobs": None, **rag},
    }
    (root / "params.yaml").write_text(yaml.safe_dump(data))
    params = RagParams.model_validate(data)
    mode: CacheMode = "auto"
    session, _ = make_session(root, mode, stage="rag_judge", backend=FakeBackend(respond))
    with closing(session):
        judged = run_rag_judge(session, ROWS, params.rag, params.llm.options)
    write_jsonl(root / params.rag.out, judged)
    return root


def calls(root: Path) -> list[Any]:
    return [loaded.call for loaded in stage_reader.read_stage(root / "recordings" / "rag_judge")]


def test_one_sample_makes_exactly_the_requests_and_files_of_before(tmp_path: Path) -> None:
    default, one = record(tmp_path / "default"), record(tmp_path / "one", samples=1)
    out = "outputs/rag/judgements.jsonl"
    assert (default / out).read_bytes() == (one / out).read_bytes()
    assert b'"samples"' not in (one / out).read_bytes()
    keys = [sorted(c.record.key for c in calls(root)) for root in (default, one)]
    assert keys[0] == keys[1] and keys[0]


def _replays(run: Path, replayed: Path) -> None:
    """From the recordings alone: no model call, the same file."""
    shutil.copytree(run / "recordings", replayed / "recordings")
    record(replayed, SAMPLED, respond=_no_model, samples=3)
    out = "outputs/rag/judgements.jsonl"
    assert (replayed / out).read_bytes() == (run / out).read_bytes()


def _diff_shows_stability(one: Path, three: Path, rows: list[dict[str, Any]]) -> None:
    result = CliRunner().invoke(main, ["diff", str(one), str(three), "--design", "rag", "--json"])
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)["metrics"]
    assert {m["metric"] for m in metrics} == {"relevance", "accuracy"}
    for metric in metrics:
        table = [row["samples"][metric["metric"]] for row in rows]
        shown = metric["stability"]["B"]
        assert set(metric["stability"]) == {"B"} and shown["judgements"] == len(table)
        assert shown["within_sd"] == pytest.approx(
            float(np.mean([np.std(s, ddof=1) for s in table])), abs=1e-4
        )
        assert shown["straddle_share"] is None  # the RAG judge has no pass threshold


def test_three_samples_seeded_combined_replayed_and_diffed(tmp_path: Path) -> None:
    one = record(tmp_path / "one", SAMPLED)
    three = record(tmp_path / "three", SAMPLED, samples=3)
    found = calls(three)
    seeds: dict[str, dict[str, int]] = {}
    for call in found:
        seeds.setdefault(call.context.item, {})[str(call.context.label("sample"))] = (
            call.record.request.options.seed
        )
    assert len(seeds) == len(ROWS)
    assert all(s == {"0": 7, "1": sample_seed(7, 1), "2": sample_seed(7, 2)} for s in seeds.values())
    zero = {c.record.key for c in found if c.context.label("sample") == "0"}
    assert zero == {c.record.key for c in calls(one)}  # sample 0 is the call a one-sample run makes

    out = three / "outputs/rag/judgements.jsonl"
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    for row in rows:
        judged = ScoredDimensions.model_validate(row["judgement"])
        for name, samples in row["samples"].items():
            assert len(samples) == 3 and judged.dimensions[name].score == combine(samples, "majority")
        assert len(judged.call_keys) == 3
    assert any(len(set(s)) > 1 for row in rows for s in row["samples"].values())  # they do differ

    _replays(three, tmp_path / "replayed")
    _diff_shows_stability(one, three, rows)


def test_at_temperature_zero_the_run_says_the_samples_differ_only_by_seed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record(tmp_path / "run", samples=2)
    assert "rag.samples 2 at temperature 0: the samples can differ only through their seeds" in (
        capsys.readouterr().err
    )
