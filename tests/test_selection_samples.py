"""selection.samples: the scorer's judge.samples. Each rating asked N times, sample i with the seed
derived from llm.options.seed and i (pipeline.judges.samples), combined by selection.combine; with
one sample, exactly the requests and files of before. `judgeloop diff` then reports the scorer's
stability per criterion, as for the paper's judge."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import krippendorff
import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from pipeline.data.jsonl import write_records
from pipeline.experiments.selection.files import PICKS, SCORES
from pipeline.experiments.selection.params import SelectionParams
from pipeline.experiments.selection.score import SCORED
from pipeline.judges.samples import combine, sample_seed
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.recordings import stage_reader
from pipeline.llm.types import ChatRequest
from pipeline.tools.cli import main
from tests.selection_run import by_name, run_selection, track_names

SETTINGS = {"limit": 2, "pool_size": 6, "tie_margin": 0.05}
EXPECTED_SEEDS = {"0": 7, "1": sample_seed(7, 1), "2": sample_seed(7, 2)}


def seeded(request: ChatRequest) -> str:
    """A rating of the question; at temperature > 0 it moves with the seed, as sampling does."""
    if len(track_names(request)) == 2:
        return by_name(request)
    text = "\n".join(m.content for m in request.messages)
    rating = 1 + int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) % 5
    if request.options.temperature > 0:
        shift = hashlib.sha256(str(request.options.seed).encode()).digest()[0] % 3 - 1
        rating = min(5, max(1, rating + shift))
    return json.dumps({"reason": "It fits.", "rating": rating})


def record(root: Path, llm: dict[str, Any] | None = None, **selection: Any) -> SelectionParams:
    root.mkdir(parents=True)
    data = {"llm": {"backend": "fake", **(llm or {})}, "selection": {**SETTINGS, **selection}}
    (root / "params.yaml").write_text(yaml.safe_dump(data))
    params = SelectionParams.model_validate(data)
    scored, picks, _ = run_selection(root, params, backend=lambda: FakeBackend(seeded, name="sampled"))
    (root / SCORES).parent.mkdir(parents=True)
    SCORED.write(root / SCORES, scored)
    write_records(root / PICKS, picks)
    return params


def rating_calls(root: Path) -> list[Any]:
    return [loaded.call for loaded in stage_reader.read_stage(root / "recordings" / "select_score")]


def test_one_sample_makes_exactly_the_requests_and_files_of_before(tmp_path: Path) -> None:
    record(tmp_path / "default")
    record(tmp_path / "one", samples=1, combine="mean")
    for name in (SCORES, PICKS):
        assert (tmp_path / "default" / name).read_bytes() == (tmp_path / "one" / name).read_bytes()
        assert b'"samples"' not in (tmp_path / "one" / name).read_bytes()
    keys = [sorted(c.record.key for c in rating_calls(tmp_path / d)) for d in ("default", "one")]
    assert keys[0] == keys[1] and keys[0]
    assert all(c.context.label("sample") is None for c in rating_calls(tmp_path / "one"))


def _seeds(calls: list[Any]) -> dict[tuple[Any, ...], dict[str, int]]:
    found: dict[tuple[Any, ...], dict[str, int]] = {}
    for call in (c for c in calls if c.context.attempt == 0):
        question = (call.context.item, call.context.label("candidate"), call.context.label("criterion"))
        found.setdefault(question, {})[str(call.context.label("sample"))] = call.record.request.options.seed
    return found


def _replays(run: Path, again: Path) -> None:
    again.mkdir()
    (again / "params.yaml").write_bytes((run / "params.yaml").read_bytes())
    shutil.copytree(run / "recordings", again / "recordings")
    params = SelectionParams.model_validate(yaml.safe_load((run / "params.yaml").read_text()))
    scored, _, _ = run_selection(
        again, params, backend=lambda: FakeBackend(lambda r: pytest.fail("a replay asked the model"))
    )
    SCORED.write(again / "scores.jsonl", scored)
    assert (again / "scores.jsonl").read_bytes() == (run / SCORES).read_bytes()


def _diff_shows_stability(one: Path, three: Path, judged: list[dict[str, Any]]) -> None:
    """diff of the one-sample run against the three-sample one: each criterion's stability in B,
    as computed here by hand and by the krippendorff package."""
    result = CliRunner().invoke(main, ["diff", str(one), str(three), "--design", "selection", "--json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    for metric in (m for m in found["metrics"] if m["metric"] != "selected"):
        rows = [s["samples"] for s in judged if s["criterion"] == metric["metric"]]
        shown = metric["stability"]["B"]
        assert set(metric["stability"]) == {"B"} and shown["judgements"] == len(rows)
        sd = float(np.mean([np.std(r, ddof=1) for r in rows]))
        assert shown["within_sd"] == pytest.approx(sd, abs=1e-4)
        expected = krippendorff.alpha(
            reliability_data=np.array(rows, dtype=float).T, level_of_measurement="interval"
        )
        assert shown["alpha_interval"] == pytest.approx(expected, abs=1e-4)
    changed = [c for c in found["changes"] if c["metric"] != "selected"]
    assert changed and {c["cause"] for c in changed} == {"samples"}


def test_three_samples_seeded_combined_recorded_replayed_and_diffed(tmp_path: Path) -> None:
    llm = {"options": {"temperature": 0.7, "seed": 7}}
    record(tmp_path / "one", llm)
    record(tmp_path / "three", llm, samples=3)
    calls = rating_calls(tmp_path / "three")
    assert _seeds(calls) and all(s == EXPECTED_SEEDS for s in _seeds(calls).values())
    # Sample 0 is the call a one-sample run makes: the same key.
    one = {c.record.key for c in rating_calls(tmp_path / "one") if c.context.attempt == 0}
    zero = {c.record.key for c in calls if (c.context.label("sample"), c.context.attempt) == ("0", 0)}
    assert zero and zero == one

    records = [json.loads(line) for line in (tmp_path / "three" / SCORES).read_text().splitlines()]
    judged = [s for r in records for c in r["pool"] for s in c["scores"].values() if s["source"] == "judge"]
    assert judged and all(
        len(s["samples"]) == 3 and s["rating"] == combine(s["samples"], "majority") for s in judged
    )
    assert any(len(set(s["samples"])) > 1 for s in judged)  # they do differ
    _replays(tmp_path / "three", tmp_path / "again")

    _diff_shows_stability(tmp_path / "one", tmp_path / "three", judged)


def test_at_temperature_zero_the_run_says_the_samples_differ_only_by_seed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record(tmp_path / "run", samples=2)
    assert "selection.samples 2 at temperature 0: the samples can differ only through their seeds" in (
        capsys.readouterr().err
    )
