"""judge.samples: each judgement asked N times, sample i with a seed derived from llm.options.seed
and i (in the request, hence the key), combined by judge.combine; with one sample, exactly the
requests and files of before. On the fake model here; tests/test_judge_samples_embedded.py asks the
real embedded model at temperature > 0."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import krippendorff
import numpy as np
import pytest
from click.testing import CliRunner

from pipeline.experiments.paper.aggregate import judge_stability
from pipeline.experiments.paper.params import load_paper_params
from pipeline.judges.samples import combine, only_seeds_differ, sample_seed
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.recordings import stage_reader
from pipeline.llm.types import ChatRequest, Options
from pipeline.loops.results import read_refinements
from pipeline.stats.stability import stability
from pipeline.testing.judge_responder import experiment_responder
from pipeline.tools.cli import main
from tests.project import run_pipeline, write_data, write_params

SCORE = re.compile(r"Score: (\d)")


def seeded(request: ChatRequest) -> str:
    """experiment_responder; at temperature > 0 its judge scores move with the seed, as sampling does."""
    text = experiment_responder(request.model_dump(mode="json"))
    found = SCORE.search(text)
    if found and request.options.temperature > 0:
        shift = hashlib.sha256(str(request.options.seed).encode()).digest()[0] % 3 - 1
        text = text.replace(found.group(0), f"Score: {min(5, max(1, int(found.group(1)) + shift))}")
    return text


def record(
    root: Path, responder: Callable[[ChatRequest], str] = seeded, **sections: dict[str, Any]
) -> FakeBackend:
    root.mkdir(parents=True, exist_ok=True)
    write_data(root)
    write_params(root, **sections)
    fake = FakeBackend(responder, name="sampled")
    run_pipeline(root, fake)
    return fake


def judge_calls(root: Path) -> list[Any]:
    return [
        loaded.call
        for loaded in stage_reader.read_all(root / "recordings")
        if loaded.call.context.label("role") == "judge"
    ]


def test_seeds_are_derived_and_sample_zero_keeps_the_seed() -> None:
    assert sample_seed(42, 0) == 42
    seeds = [sample_seed(42, i) for i in range(50)]
    assert len(set(seeds)) == 50 and all(0 <= s < 2**32 for s in seeds)
    assert seeds == [sample_seed(42, i) for i in range(50)]  # derived, not drawn
    assert sample_seed(43, 1) != sample_seed(42, 1)
    assert combine([3, 4, None, 5], "mean") == 4
    assert combine([2, 4, 4, 2, 5], "majority") == 2  # a tie goes to the lower score
    assert combine([None, None], "mean") is None
    assert only_seeds_differ(3, Options(temperature=0.0)) is not None
    assert only_seeds_differ(3, Options(temperature=0.7)) is None
    assert only_seeds_differ(1, Options(temperature=0.0)) is None


def test_one_sample_makes_exactly_the_requests_and_files_of_before(tmp_path: Path) -> None:
    record(tmp_path / "default")
    record(tmp_path / "one", judge={"samples": 1, "combine": "majority"})
    for name in ("outputs/paper/judgements.jsonl", "outputs/paper/refinement.jsonl"):
        assert (tmp_path / "default" / name).read_bytes() == (tmp_path / "one" / name).read_bytes()
        assert b'"samples"' not in (tmp_path / "one" / name).read_bytes()
    keys = [sorted(c.record.key for c in judge_calls(tmp_path / d)) for d in ("default", "one")]
    assert keys[0] == keys[1] and keys[0]


def _seeds_by_question(calls: list[Any]) -> dict[tuple[Any, ...], dict[str, int]]:
    by_question: dict[tuple[Any, ...], dict[str, int]] = {}
    for call in (c for c in calls if c.context.attempt == 0):
        question = (call.context.item, call.context.step, call.context.label("metric"))
        by_question.setdefault(question, {})[call.context.label("sample") or ""] = (
            call.record.request.options.seed
        )
    return by_question


def _sample_rows(refinements: list[Any], metric: str) -> list[list[float | None]]:
    judged = [it.metrics.get(metric) for r in refinements for it in r.iterations]
    return [
        [None if s is None else float(s) for s in (m.samples or ())]
        for m in judged
        if m is not None and not m.carried_over
    ]


def _check_stability(stable: dict[str, Any], rows: list[list[float | None]], threshold: float) -> None:
    """What the aggregate wrote for one metric, computed here by hand and by the krippendorff package."""
    usable = [r for r in ([s for s in row if s is not None] for row in rows) if len(r) >= 2]
    assert stable["judgements"] == len(usable)
    sd = float(np.mean([np.std(r, ddof=1) for r in usable]))
    assert stable["within_item_sd"] == pytest.approx(sd, abs=1e-4)
    straddle = sum(min(r) <= threshold < max(r) for r in usable) / len(usable)
    assert stable["straddle_threshold_share"] == pytest.approx(straddle, abs=1e-4)
    if len({s for r in usable for s in r}) > 1:
        table = np.array([[np.nan if s is None else s for s in row] for row in rows]).T
        expected = krippendorff.alpha(reliability_data=table, level_of_measurement="interval")
        assert stable["krippendorff_alpha_interval"] == pytest.approx(expected, abs=1e-4)


def _replays(run: Path, again: Path) -> None:
    """A rerun from the recordings alone: no model call, the same files."""
    again.mkdir()
    (again / "params.yaml").write_bytes((run / "params.yaml").read_bytes())
    shutil.copytree(run / "recordings", again / "recordings")
    write_data(again)
    run_pipeline(again, FakeBackend(lambda r: pytest.fail("a replay asked the model"), name="sampled"))
    for name in ("outputs/paper/judgements.jsonl", "outputs/paper/refinement.jsonl"):
        assert (again / name).read_bytes() == (run / name).read_bytes()


def _diff_shows_samples(one: Path, three: Path, stable: dict[str, Any]) -> None:
    """diff takes runs with samples: a one-sample run against the three-sample one."""
    result = CliRunner().invoke(main, ["diff", str(one), str(three), "--design", "paper", "--json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert found["changes"] and {c["cause"] for c in found["changes"]} <= {"samples", "input"}
    for metric in found["metrics"]:  # the sampled run's stability, as its aggregate computes it
        assert set(metric["stability"]) == {"B"}
        shown, computed = metric["stability"]["B"], stable[metric["metric"]]
        assert shown["judgements"] == computed["judgements"]
        assert shown["within_sd"] == pytest.approx(computed["within_item_sd"], abs=1e-4)
        assert shown["straddle_share"] == pytest.approx(computed["straddle_threshold_share"], abs=1e-4)


def test_three_samples_each_with_its_seed_combined_recorded_and_replayed(tmp_path: Path) -> None:
    llm: dict[str, Any] = {"options": {"temperature": 0.7, "seed": 7}}
    record(tmp_path / "one", llm=llm)
    record(tmp_path / "three", judge={"samples": 3}, llm=llm)
    params = load_paper_params(tmp_path / "three" / "params.yaml")
    calls = judge_calls(tmp_path / "three")
    seeds = _seeds_by_question(calls)
    assert seeds and all(
        s == {"0": 7, "1": sample_seed(7, 1), "2": sample_seed(7, 2)} for s in seeds.values()
    )
    # Sample 0 is the call a one-sample run makes: the same key, served from the same recording.
    first = {
        c.record.key for c in judge_calls(tmp_path / "one") if (c.context.attempt, c.context.step) == (0, 0)
    }
    zero = {
        c.record.key
        for c in calls
        if (c.context.label("sample"), c.context.attempt, c.context.step) == ("0", 0, 0)
    }
    assert zero and zero == first

    refinements = read_refinements(tmp_path / "three" / params.refine.out, params.judge.metrics)
    judged = [
        m for r in refinements for it in r.iterations for m in it.metrics.values() if not m.carried_over
    ]
    assert judged and all(m.samples is not None and len(m.samples) == 3 for m in judged)
    assert all(m.score == combine(m.samples or (), "mean") for m in judged)
    assert any(len({s for s in m.samples or () if s is not None}) > 1 for m in judged)  # they do differ

    stable = judge_stability(refinements, params)
    assert stable["samples"] == 3 and stable["combine"] == "mean"
    for metric in params.judge.metrics:
        _check_stability(stable[metric], _sample_rows(refinements, metric), params.refine.threshold)
    _replays(tmp_path / "three", tmp_path / "again")
    _diff_shows_samples(tmp_path / "one", tmp_path / "three", stable)


def test_at_temperature_zero_the_run_says_the_samples_differ_only_by_seed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record(tmp_path / "run", judge={"samples": 2})
    assert (
        "judge.samples 2 at temperature 0: the samples can differ only through their seeds"
        in capsys.readouterr().err
    )


def test_stability_by_hand() -> None:
    found = stability([[1, 2, 3], [4, 4, 4], [2, None, 5], [3, None, None]], threshold=3)
    assert found.judgements == 3
    assert found.within_sd == pytest.approx((1.0 + 0.0 + np.std([2, 5], ddof=1)) / 3)
    assert found.straddle_share == pytest.approx(1 / 3)  # [1,2,3] all fail (<= 3), [4,4,4] all pass
    assert stability([[3], [4]], threshold=3).within_sd is None


def _summeval_reply(request: ChatRequest) -> str:
    """A score that moves with the seed at temperature > 0."""
    shift = (
        hashlib.sha256(str(request.options.seed).encode()).digest()[0] % 5
        if request.options.temperature
        else 2
    )
    return json.dumps({"score": 1 + shift})


def test_summeval_samples_are_combined_and_one_sample_writes_what_it_wrote(tmp_path: Path) -> None:
    from pipeline.data.summeval import load_summeval, subset
    from pipeline.experiments.summeval.judge import run_summeval_judge
    from pipeline.experiments.summeval.params import SummEvalParams, SummEvalSettings
    from tests.conftest import ROOT
    from tests.helpers import make_session

    demo = ROOT / "data" / "summeval-demo"
    corpus = subset(load_summeval(demo), 1)

    def judged(folder: str, temperature: float, **summeval: object) -> tuple[list[Any], list[Any]]:
        settings = SummEvalSettings.model_validate(
            {"corpus": str(demo), "dimensions": ["coherence"], **summeval}
        )
        params = SummEvalParams.model_validate(
            {"summeval": settings.model_dump(), "llm": {"options": {"temperature": temperature}}}
        )
        backend = FakeBackend(_summeval_reply, parallelism=1)
        session, fake = make_session(tmp_path / folder, stage="summeval_judge", backend=backend)
        return run_summeval_judge(params, session, corpus), list(fake.calls)

    default, default_calls = judged("default", 0.0)
    one, one_calls = judged("one", 0.0, samples=1, combine="majority")
    assert [r.model_dump_json() for r in default] == [r.model_dump_json() for r in one]
    assert default_calls == one_calls and all("samples" not in r.model_dump() for r in one)

    three, calls = judged("three", 0.7, samples=3)
    assert len(calls) == 3 * len(three)
    assert {c.options.seed for c in calls} == {42, sample_seed(42, 1), sample_seed(42, 2)}
    for row in three:
        assert row.samples is not None and len(row.samples) == 3
        assert row.score == combine(row.samples, "mean")
