"""`judgeloop diff` on the selection design (seed 001): its judgement unit is one judged criterion's
rating of one candidate of one request (`request/track`), and `selected`, the candidate's weighted
score with the verdict picked or not. Pairs of runs differing in one thing each (the model, the
rater's prompt, the catalog the judge is shown) are recorded with a fake judge whose ratings depend
on exactly what it is asked; every changed rating must be blamed on that one thing, with counts equal
to a count from the recordings, and every change of picks on the ratings it was made from."""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from pipeline.data.jsonl import write_records
from pipeline.experiments.selection import judging
from pipeline.experiments.selection.files import PICKS, SCORES
from pipeline.experiments.selection.score import SCORED
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.recordings import stage_reader
from pipeline.llm.recordings.stage_reader import LoadedCall
from pipeline.llm.types import ChatRequest
from pipeline.tools.cli import main
from tests import diff_runs
from tests.diff_runs import assert_counted_as_recorded, last_replies
from tests.selection_run import ROOT, by_name, run_selection, selection_params, track_names

CATALOG = ROOT / "data/selection/catalog_fictional.csv"
SETTINGS = {"limit": 2, "pool_size": 8, "tie_margin": 0.05}


def rater(model: str) -> Any:
    """A rating that depends on the whole question, and on the model where it ends in -b."""

    def respond(request: ChatRequest) -> str:
        if len(track_names(request)) == 2:
            return by_name(request)
        text = "\n".join(m.content for m in request.messages)
        salt = model if model.endswith("-b") else ""
        rating = 1 + int(hashlib.sha256(f"{salt}|{text}".encode()).hexdigest()[:8], 16) % 5
        return json.dumps({"reason": "It fits.", "rating": rating})

    return respond


def record(root: Path, model: str, catalog: Path = CATALOG) -> Path:
    root.mkdir(parents=True)
    settings = {**SETTINGS, "catalog": str(catalog)}
    (root / "params.yaml").write_text(
        yaml.safe_dump({"llm": {"backend": "fake", "model": model}, "selection": settings})
    )
    params = selection_params(catalog=str(catalog))
    scored, picks, _ = run_selection(root, params, backend=lambda: FakeBackend(rater(model), name=model))
    (root / SCORES).parent.mkdir(parents=True)
    SCORED.write(root / SCORES, scored)
    write_records(root / PICKS, picks)
    return root


def rated(root: Path) -> dict[tuple[str, str], int]:
    """Each rating as its last attempt's reply states it, from the select_score recordings alone:
    (request/candidate, criterion) -> rating."""

    def rating(loaded: LoadedCall) -> tuple[str, str]:
        context = loaded.call.context
        return (f"{context.item}/{context.label('candidate')}", str(context.label("criterion")))

    replies = last_replies(stage_reader.read_stage(root / "recordings" / "select_score"), rating)
    return {key: json.loads(text)["rating"] for key, text in replies.items()}


def diff_json(a: Path, b: Path) -> dict[str, Any]:
    return diff_runs.diff_json(a, b, "selection")


def _blamed(found: dict[str, Any], cause: str, a: Path, b: Path) -> None:
    """Every changed rating on `cause`, counted as the recordings count it; every change of picks
    on the ratings they were made from."""
    ratings = [c for c in found["changes"] if c["metric"] != "selected"]
    assert ratings, "the two runs should rate differently somewhere"
    assert {c["cause"] for c in ratings} == {cause}, [(c["item"], c["metric"], c["detail"]) for c in ratings]
    selected = next(m for m in found["metrics"] if m["metric"] == "selected")
    assert set(selected["causes"]) <= {"input"}
    assert_counted_as_recorded(found, cause, rated(a), rated(b), lambda k: k[1], skip=("selected",))
    assert {m["metric"] for m in found["metrics"]} == {"mood_match", "relevance", "selected"}


@pytest.fixture
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record(tmp_path_factory.mktemp("runs") / "a", "judge-a")


def test_a_new_model_is_blamed_for_every_changed_rating(baseline: Path, tmp_path: Path) -> None:
    other = record(tmp_path / "b", "judge-b")
    found = diff_json(baseline, other)
    _blamed(found, "model", baseline, other)
    selected = next(m for m in found["metrics"] if m["metric"] == "selected")
    picks = {
        side: {
            (r["request"], p)
            for r in map(json.loads, (root / PICKS).read_text().splitlines())
            for p in r["selection"]["picks"]
        }
        for side, root in (("a", baseline), ("b", other))
    }
    assert selected["flipped"]["pass_to_fail"] == len(picks["a"] - picks["b"]) > 0
    assert selected["flipped"]["fail_to_pass"] == len(picks["b"] - picks["a"])


def test_a_new_rater_prompt_is_blamed_for_every_changed_rating(
    baseline: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(judging, "RATER_SYSTEM", judging.RATER_SYSTEM + " Be strict.")
    other = record(tmp_path / "b", "judge-a")
    found = diff_json(baseline, other)
    _blamed(found, "prompt", baseline, other)
    assert {c["detail"] for c in found["changes"] if c["metric"] != "selected"} == {
        "message 1 (system): +1 −1 lines"
    }


def test_a_catalog_edit_is_blamed_on_the_judged_input(baseline: Path, tmp_path: Path) -> None:
    """Every track renamed: the same pools, each shown to the judge otherwise."""
    with CATALOG.open(newline="", encoding="utf-8") as source:
        rows = list(csv.DictReader(source))
    edited = tmp_path / "catalog.csv"
    with edited.open("w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({**row, "track_name": row["track_name"] + " (Remastered)"} for row in rows)
    other = record(tmp_path / "b", "judge-a", catalog=edited)
    found = diff_json(baseline, other)
    _blamed(found, "input", baseline, other)


def test_a_run_against_itself_changes_nothing(baseline: Path) -> None:
    found = diff_json(baseline, baseline)
    assert found["changes"] == [] and all(m["paired"] > 0 for m in found["metrics"])


def test_a_damaged_picks_line_is_named_with_its_file_and_line(baseline: Path, tmp_path: Path) -> None:
    damaged = tmp_path / "damaged"
    shutil.copytree(baseline, damaged)
    lines = (damaged / PICKS).read_text().splitlines()
    (damaged / PICKS).write_text("\n".join([lines[0], '{"request": "deep-focus"}', *lines[2:]]) + "\n")
    result = CliRunner().invoke(main, ["diff", str(baseline), str(damaged), "--design", "selection"])
    assert result.exit_code != 0
    assert f"{damaged / PICKS}:2: not a picks record" in result.output
    assert "re-run select_pick" in result.output
