"""`judgeloop calibrate --scores --human`: the table and the JSON, on files with known answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from pipeline.tools.cli import main

LEVELS = ("summary", "system", "global")
STATISTICS = ("spearman", "kendall", "pearson")


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def human_rows(n_groups: int = 25, n_systems: int = 8, seed: int = 0) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    rows = []
    for g in range(n_groups):
        for s in range(n_systems):
            # Systems differ in quality, so that system means are not all alike.
            ratings = [int(np.clip(rng.integers(1, 6) + (s - n_systems // 2) // 3, 1, 5)) for _ in range(3)]
            for metric in ("coherence", "relevance"):
                rows.append({"item": f"doc{g}/sys{s}", "metric": metric, "ratings": ratings})
    return rows


def score_rows(humans: list[dict[str, Any]], scores: list[float]) -> list[dict[str, Any]]:
    return [
        {
            "item": h["item"],
            "group": h["item"].split("/")[0],
            "system": h["item"].split("/")[1],
            "metric": h["metric"],
            "score": score,
        }
        for h, score in zip(humans, scores, strict=True)
    ]


def run(*args: str) -> Any:
    result = CliRunner().invoke(main, ["calibrate", *args])
    return result


def calibrate_json(tmp_path: Path, scores: list[dict[str, Any]], humans: list[dict[str, Any]]) -> Any:
    s, h = write_jsonl(tmp_path / "s.jsonl", scores), write_jsonl(tmp_path / "h.jsonl", humans)
    result = run("--scores", str(s), "--human", str(h), "--json", "--resamples", "300")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_scores_equal_to_the_mean_human_rating_agree_perfectly_at_every_level(tmp_path: Path) -> None:
    humans = human_rows()
    scores = score_rows(humans, [float(np.mean(h["ratings"])) for h in humans])
    data = calibrate_json(tmp_path, scores, humans)
    for metric in ("coherence", "relevance"):
        result = data["metrics"][metric]["score"]
        for level in LEVELS:
            for statistic in STATISTICS:
                estimate = result["levels"][level][statistic]
                assert estimate["value"] == pytest.approx(1.0), (metric, level, statistic)
                assert estimate["ci95"] == pytest.approx([1.0, 1.0])
        assert result["alpha_judge_vs_mean_human"] == pytest.approx(1.0)
        assert result["items_used"] == 200


def test_shuffled_scores_give_intervals_that_contain_0(tmp_path: Path) -> None:
    humans = human_rows()
    means = [float(np.mean(h["ratings"])) for h in humans]
    shuffled = list(np.random.default_rng(1).permutation(means))
    data = calibrate_json(tmp_path, score_rows(humans, shuffled), humans)
    for metric in ("coherence", "relevance"):
        for level in LEVELS:
            for statistic in STATISTICS:
                low, high = data["metrics"][metric]["score"]["levels"][level][statistic]["ci95"]
                assert low < 0 < high, (metric, level, statistic)


def test_the_same_seed_gives_the_same_bytes_and_the_table_names_every_number(tmp_path: Path) -> None:
    humans = human_rows(n_groups=6, n_systems=4)
    scores = score_rows(humans, [float(h["ratings"][0]) for h in humans])
    s, h = write_jsonl(tmp_path / "s.jsonl", scores), write_jsonl(tmp_path / "h.jsonl", humans)
    args = ("--scores", str(s), "--human", str(h), "--resamples", "100", "--seed", "5")
    assert run(*args, "--json").output == run(*args, "--json").output
    table = run(*args).output
    for words in ("Spearman rho", "Kendall tau-b", "Pearson r", "summary", "system", "global", "ceiling"):
        assert words in table
    assert "6 groups" in table and "4 systems" in table and "24 items" in table


def test_weighted_scores_get_their_own_rows_and_unscored_items_are_counted(tmp_path: Path) -> None:
    humans = human_rows(n_groups=6, n_systems=4)
    scores = score_rows(humans, [float(h["ratings"][0]) for h in humans])
    for row, human in zip(scores, humans, strict=True):
        row["weighted_score"] = float(np.mean(human["ratings"]))
    scores[0]["score"] = None
    data = calibrate_json(tmp_path, scores, humans)
    coherence = data["metrics"]["coherence"]
    assert coherence["score"]["items_unscored"] == 1
    assert coherence["weighted_score"]["items_used"] == 24
    assert coherence["weighted_score"]["levels"]["global"]["pearson"]["value"] == pytest.approx(1.0)


def test_items_without_human_ratings_are_counted_and_a_metric_with_none_is_an_error(tmp_path: Path) -> None:
    humans = human_rows(n_groups=6, n_systems=4)
    scores = score_rows(humans, [float(h["ratings"][0]) for h in humans])
    extra = {"item": "docX/sys0", "group": "docX", "system": "sys0", "metric": "coherence", "score": 3}
    data = calibrate_json(tmp_path, [*scores, extra], humans)
    assert data["metrics"]["coherence"]["items_without_human"] == 1

    fluency = {**extra, "metric": "fluency"}
    s = write_jsonl(tmp_path / "s2.jsonl", [*scores, fluency])
    h = write_jsonl(tmp_path / "h.jsonl", humans)
    result = run("--scores", str(s), "--human", str(h))
    assert result.exit_code != 0
    assert "fluency" in result.output and "has a human rating" in result.output


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"item": "a", "group": "g", "system": "s", "metric": "m"}', 'no "score"'),
        ('{"item": "a", "group": "g", "system": "s", "metric": "m", "score": "4"}', '"score" is "4"'),
        ('{"item": "", "group": "g", "system": "s", "metric": "m", "score": 4}', '"item" is missing'),
        ('{"item": "x/1", "group": "g", "system": "s", "metric": "coherence", "score": 4}', "again (line 1)"),
    ],
)
def test_a_bad_score_row_is_reported_with_its_file_line_and_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str, problem: str
) -> None:
    monkeypatch.chdir(tmp_path)  # the files are the project's own: an error quotes what it refuses
    good = '{"item": "x/1", "group": "g", "system": "s", "metric": "coherence", "score": 4}'
    scores = tmp_path / "scores.jsonl"
    scores.write_text(f"{good}\n\n{line}\n", encoding="utf-8")
    humans = write_jsonl(tmp_path / "h.jsonl", [{"item": "x/1", "metric": "coherence", "ratings": [4]}])
    result = run("--scores", str(scores), "--human", str(humans))
    assert result.exit_code != 0
    assert f"{scores}:3: " in result.output
    assert problem in result.output and "Fix:" in result.output


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"item": "x/1", "metric": "coherence"}', '"ratings" is missing'),
        ('{"item": "x/1", "metric": "coherence", "ratings": []}', '"ratings" is missing or not a non-empty'),
        ('{"item": "x/1", "metric": "coherence", "ratings": [null, null]}', "every rating is null"),
        ('{"item": "x/1", "metric": "coherence", "ratings": [4, "five"]}', '"ratings" is "five"'),
    ],
)
def test_a_bad_human_row_is_reported_with_its_file_line_and_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str, problem: str
) -> None:
    monkeypatch.chdir(tmp_path)  # the files are the project's own: an error quotes what it refuses
    scores = write_jsonl(
        tmp_path / "s.jsonl",
        [{"item": "x/1", "group": "g", "system": "s", "metric": "coherence", "score": 4}],
    )
    humans = tmp_path / "human.jsonl"
    humans.write_text(line + "\n", encoding="utf-8")
    result = run("--scores", str(scores), "--human", str(humans))
    assert result.exit_code != 0
    assert f"{humans}:1: " in result.output and problem in result.output and "Fix:" in result.output


def test_one_rating_per_item_gives_a_full_table_with_alpha_null_and_the_reason(tmp_path: Path) -> None:
    # One annotator per item, the most common case: agreement among people is undefined, not an error.
    humans = [{**h, "ratings": h["ratings"][:1]} for h in human_rows(n_groups=6, n_systems=4)]
    scores = score_rows(humans, [float(h["ratings"][0]) for h in humans])
    data = calibrate_json(tmp_path, scores, humans)
    for metric in ("coherence", "relevance"):
        result = data["metrics"][metric]
        assert result["human_alpha"] is None
        assert "one rating per item" in result["human_alpha_undefined"]
        assert result["ratings_per_item"] == [1, 1]
        # Everything else is computed: every level's correlations, and alpha judge vs human.
        for level in LEVELS:
            assert result["score"]["levels"][level]["spearman"]["value"] == pytest.approx(1.0)
        assert result["score"]["alpha_judge_vs_mean_human"] == pytest.approx(1.0)
        assert "alpha_judge_vs_mean_human_undefined" not in result["score"]
    s, h = tmp_path / "s.jsonl", tmp_path / "h.jsonl"
    table = run("--scores", str(s), "--human", str(h), "--resamples", "50")
    assert table.exit_code == 0, table.output
    assert "Traceback" not in table.output
    assert "alpha (ordinal) n/a: no item has two or more ratings (one rating per item)" in table.output
    assert table.output.count("global") == 2  # both metrics' tables are there in full


def test_scales_that_differ_are_named_in_the_table_and_the_json(tmp_path: Path) -> None:
    humans = human_rows(n_groups=6, n_systems=4)
    # The people rated 1-5; the judge was asked for 1-10.
    scores = score_rows(humans, [float(2 * round(np.mean(h["ratings"]))) for h in humans])
    data = calibrate_json(tmp_path, scores, humans)
    scales = data["metrics"]["coherence"]["scales"]
    assert scales["judge"]["scale"] == "1-10" and scales["human"]["scale"] == "1-5"
    assert "1-10" in scales["difference"] and "1-5" in scales["difference"]
    table = run(
        "--scores", str(tmp_path / "s.jsonl"), "--human", str(tmp_path / "h.jsonl"), "--resamples", "50"
    )
    assert "WARNING: the judge's scores are whole numbers from 2 to 10 (1-10)" in table.output


def test_the_same_scale_says_nothing_is_wrong(tmp_path: Path) -> None:
    humans = human_rows(n_groups=6, n_systems=4)
    data = calibrate_json(tmp_path, score_rows(humans, [3.0] * len(humans)), humans)
    assert data["metrics"]["coherence"]["scales"]["difference"] is None
