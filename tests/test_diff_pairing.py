"""`judgeloop diff` pairs each judgement with its counterpart exactly, by (design, item, iteration,
metric), whatever the order of the results files, with the items one run lacks counted as one
run's alone, and refuses a run whose results give one judgement twice (which of the two would be
compared is not the diff's to guess: the later silently replaced the earlier)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.tools.cli import main
from tests.test_diff import diff_json, record

RESULTS = Path("outputs/paper/refinement.jsonl")


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record(tmp_path_factory.mktemp("runs") / "a", "judge-a")


def _copy(baseline: Path, to: Path, lines: list[str] | None = None) -> Path:
    shutil.copytree(baseline, to)
    if lines is not None:
        (to / RESULTS).write_text("".join(lines), encoding="utf-8")
    return to


def _lines(run: Path) -> list[str]:
    return (run / RESULTS).read_text(encoding="utf-8").splitlines(keepends=True)


def test_reordered_results_pair_as_before(baseline: Path, tmp_path: Path) -> None:
    lines = _lines(baseline)
    assert len(lines) > 1
    other = _copy(baseline, tmp_path / "b", lines[::-1])
    found = diff_json(baseline, other)
    assert found["changes"] == []
    assert all(m["only_in_a"] == m["only_in_b"] == 0 and m["changed"] == 0 for m in found["metrics"])


def test_an_item_one_run_lacks_is_counted_as_the_other_s_alone(baseline: Path, tmp_path: Path) -> None:
    lines = _lines(baseline)
    dropped = json.loads(lines[0])
    judged = sum(not m["carried_over"] for it in dropped["iterations"] for m in it["metrics"].values())
    other = _copy(baseline, tmp_path / "b", lines[1:])
    found = diff_json(baseline, other)
    assert found["changes"] == []
    assert sum(m["only_in_a"] for m in found["metrics"]) == judged
    assert sum(m["only_in_b"] for m in found["metrics"]) == 0
    assert {a["item"] for m in found["metrics"] for a in m["alone"]["a"]} == {dropped["item"]}
    assert sum(len(m["alone"]["a"]) for m in found["metrics"]) == judged
    flipped = diff_json(other, baseline)
    assert sum(m["only_in_b"] for m in flipped["metrics"]) == judged


def test_a_judgement_given_twice_is_refused_naming_it(baseline: Path, tmp_path: Path) -> None:
    lines = _lines(baseline)
    item = json.loads(lines[0])["item"]
    other = _copy(baseline, tmp_path / "b", [*lines, lines[0]])
    result = CliRunner().invoke(main, ["diff", str(baseline), str(other), "--design", "paper"])
    assert result.exit_code != 0
    assert f"item '{item}'" in result.output and "twice" in result.output


def test_a_run_without_its_recordings_is_said_and_its_causes_marked(baseline: Path, tmp_path: Path) -> None:
    """Without B's recordings, the diff read B's results alone and said nothing of it: a change
    blamed on its input or its samples looked as if the prompt, model and sampling had been checked."""
    other = _copy(baseline, tmp_path / "b")
    shutil.rmtree(other / "recordings")
    lines = _lines(other)
    row = json.loads(lines[0])
    row["iterations"][0]["assessment"]["text"] += " (edited)"  # its judgements now judged another input
    judged = row["iterations"][0]["metrics"]["accuracy"]
    judged["score"] = 2 if judged["score"] == 1 else 1
    (other / RESULTS).write_text(json.dumps(row) + "\n" + "".join(lines[1:]), encoding="utf-8")
    result = CliRunner().invoke(main, ["diff", str(baseline), str(other), "--design", "paper"])
    assert result.exit_code == 0, result.output
    assert re.search(
        r"^run B: (\d+) of the \1 calls its results name are not in its recordings", result.output, re.M
    )
    page = CliRunner().invoke(main, ["diff", str(baseline), str(other), "--html", str(tmp_path / "page")])
    assert page.exit_code == 0, page.output
    assert "calls its results name are not in its recordings" in (tmp_path / "page/index.html").read_text()
    found = diff_json(baseline, other)
    assert found["unrecorded_calls"]["a"] == 0 and found["unrecorded_calls"]["b"] > 0
    assert found["changes"] and all(
        "unrecorded" in c["also"] for c in found["changes"] if c["cause"] == "input"
    )
    assert any(c["cause"] == "input" for c in found["changes"])


def test_fewer_refinement_rounds_pair_the_rounds_both_ran(baseline: Path, tmp_path: Path) -> None:
    """refine.max_iterations 10 -> 0 with the same judge: the round both ran is the same calls,
    unchanged; the later rounds are the first run's alone."""
    other = record(tmp_path / "b", "judge-a", refine={"max_iterations": 0})
    found = diff_json(baseline, other)
    assert found["changes"] == []
    alone = [a for m in found["metrics"] for a in m["alone"]["a"]]
    assert alone and all(a["iteration"] >= 1 for a in alone)
    assert all(not m["alone"]["b"] for m in found["metrics"])
