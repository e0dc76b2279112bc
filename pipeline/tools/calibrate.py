"""`judgeloop calibrate`: how far a judge agrees with people, from two JSONL files.

    --scores S.jsonl   {"item", "group", "system", "metric", "score"[, "weighted_score"]} per line;
                       "score": null for an item the judge gave no readable score (counted, left out)
    --human  H.jsonl   {"item", "metric", "ratings": [r1, r2, ...]} per line (null: a missing rating)

    --experiment DESIGN   a design's own judgements against its corpus's ratings (a design with a
                       calibration, e.g. summeval after `dvc repro summeval_judge`): no export
                       step; the bootstrap's resamples and seed default to the design's params,
                       so the table is the one in its metrics file

The statistics are pipeline/stats/correlation.py's and reliability.py's; the joining,
pipeline/stats/calibration.py's.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from pipeline.data.input_files import json_objects
from pipeline.data.ratings import HumanRatings, JudgedItem
from pipeline.errors import InputError
from pipeline.experiments.design import CalibrationRows, load_ref
from pipeline.experiments.params import require_params_file
from pipeline.experiments.registry import designs
from pipeline.llm.keys import canonical_json
from pipeline.llm.project_files import quoted
from pipeline.llm.terminal import echo
from pipeline.stats.bootstrap import Estimate
from pipeline.stats.calibration import MetricCalibration, ScoreCalibration, calibration_data
from pipeline.stats.calibration import calibrate as calibrate_rows
from pipeline.stats.correlation import LEVELS, STATISTICS

SCORES_FIX = (
    'write one JSON object per line: {"item": "...", "group": "...", "system": "...", '
    '"metric": "...", "score": 4} (score null when the judge gave none)'
)
HUMAN_FIX = 'write one JSON object per line: {"item": "...", "metric": "...", "ratings": [4, 5, 3]}'


def _objects(path: Path, fix: str) -> list[tuple[int, dict[str, Any]]]:
    shown = str(path)
    rows = []
    for number, row in json_objects(path, shown):
        if isinstance(row, str):
            raise InputError(shown, number, row, fix)
        rows.append((number, row))
    return rows


def _text(row: dict[str, Any], key: str, where: tuple[str, int], fix: str) -> str:
    value = row.get(key)
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)  # numeric ids are common in exports; they name the same item as text
    if not isinstance(value, str) or not value:
        raise InputError(*where, f'"{key}" is missing or not a non-empty string', fix)
    return value


def _number(value: Any, key: str, where: tuple[str, int], fix: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InputError(
            *where, f'"{key}" is {quoted(where[0], json.dumps(value))}, not a number or null', fix
        )
    return float(value)


def _first_time(
    seen: dict[tuple[str, str], int], item: str, metric: str, where: tuple[str, int], fix: str
) -> None:
    """Refuses a second line for the same item and metric, naming the first."""
    if (item, metric) in seen:
        again = f"item {quoted(where[0], repr(item))}, metric {metric!r} again (line {seen[item, metric]})"
        raise InputError(*where, again, fix)
    seen[item, metric] = where[1]


def read_scores(path: Path) -> list[JudgedItem]:
    rows: list[JudgedItem] = []
    seen: dict[tuple[str, str], int] = {}
    for number, row in _objects(path, SCORES_FIX):
        where = (str(path), number)
        if "score" not in row:
            raise InputError(*where, 'no "score" (null if the judge gave none)', SCORES_FIX)
        score = JudgedItem(
            item=_text(row, "item", where, SCORES_FIX),
            group=_text(row, "group", where, SCORES_FIX),
            system=_text(row, "system", where, SCORES_FIX),
            metric=_text(row, "metric", where, SCORES_FIX),
            score=_number(row["score"], "score", where, SCORES_FIX),
            weighted_score=_number(row.get("weighted_score"), "weighted_score", where, SCORES_FIX),
        )
        _first_time(seen, score.item, score.metric, where, SCORES_FIX)
        rows.append(score)
    return rows


def read_human(path: Path) -> list[HumanRatings]:
    rows: list[HumanRatings] = []
    seen: dict[tuple[str, str], int] = {}
    for number, row in _objects(path, HUMAN_FIX):
        where = (str(path), number)
        ratings = row.get("ratings")
        if not isinstance(ratings, list) or not ratings:
            raise InputError(*where, '"ratings" is missing or not a non-empty list', HUMAN_FIX)
        values = tuple(_number(r, "ratings", where, HUMAN_FIX) for r in ratings)
        if all(v is None for v in values):
            raise InputError(*where, "every rating is null", HUMAN_FIX + ", or drop the line")
        human = HumanRatings(
            item=_text(row, "item", where, HUMAN_FIX),
            metric=_text(row, "metric", where, HUMAN_FIX),
            ratings=values,
        )
        _first_time(seen, human.item, human.metric, where, HUMAN_FIX)
        rows.append(human)
    return rows


# --- the table ----------------------------------------------------------------------------------

LEVEL_UNITS = {"summary": "groups", "system": "systems", "global": "items"}
HEADERS = {"spearman": "Spearman rho", "kendall": "Kendall tau-b", "pearson": "Pearson r"}


def _f(value: float) -> str:
    return "  n/a" if math.isnan(value) else f"{value:+.3f}"


def _cell(estimate: Estimate) -> str:
    return f"{_f(estimate.value)} [{_f(estimate.low)}, {_f(estimate.high)}]"


def _kind_lines(kind: ScoreCalibration) -> list[str]:
    lines = [
        f"  judge {kind.kind}: {kind.items_used} items used, {kind.items_unscored} unscored, "
        f"{kind.groups} groups"
    ]
    if not kind.levels:
        return [*lines, "    no scored item: nothing to correlate"]
    header = f"    {'level':<8} {'units':<24}" + "".join(f"{HEADERS[s]:<26}" for s in STATISTICS)
    lines.append(header.rstrip())
    for level in LEVELS:
        result = kind.levels[level]
        units = f"{result.units} {LEVEL_UNITS[level]}"
        skipped = sum(result.skipped.values())
        if skipped:
            units += f" ({skipped} skipped)"
        cells = "".join(f"{_cell(result.estimates[s]):<26}" for s in STATISTICS)
        lines.append(f"    {level:<8} {units:<24}{cells}".rstrip())
    skips = {k: v for k, v in kind.levels["summary"].skipped.items() if v}
    if skips:
        lines.append("    skipped groups: " + ", ".join(f"{v} {k}" for k, v in skips.items()))
    alpha = _alpha(kind.alpha_judge_human, kind.alpha_undefined)
    lines.append(f"    Krippendorff alpha (ordinal), judge vs mean human: {alpha}")
    return lines


def _alpha(value: float, undefined: str | None) -> str:
    return f"n/a: {undefined}" if undefined is not None else _f(value)


def _scale_lines(result: MetricCalibration) -> list[str]:
    judge, human = result.judge_scale, result.human_scale
    lines = []
    if judge is not None and human is not None:
        lines.append(f"  scales: judge {judge.describe()}; human {human.describe()}")
    if result.scale_difference is not None:
        lines.append(f"  WARNING: {result.scale_difference}")
    return lines


def render_table(results: Sequence[MetricCalibration], *, resamples: int, seed: int) -> str:
    lines = [
        f"95% intervals: percentile bootstrap over groups, {resamples} resamples, seed {seed}. "
        "Human = mean of the item's ratings."
    ]
    for result in results:
        low, high = result.ratings_per_item
        per_item = f"{low}" if low == high else f"{low}-{high}"
        alpha = _alpha(result.human_alpha, result.human_alpha_undefined)
        lines += [
            "",
            f"{result.metric}: {result.items_judged} items judged, "
            f"{result.items_without_human} without human ratings (left out)",
            f"  humans among themselves (ceiling): {per_item} ratings per item, "
            f"Krippendorff alpha (ordinal) {alpha}",
            *_scale_lines(result),
        ]
        for kind in result.kinds:
            lines += _kind_lines(kind)
    return "\n".join(lines)


def _experiment_rows(name: str) -> tuple[list[JudgedItem], list[HumanRatings], int, int]:
    """A design's judge scores and human ratings (its Design.calibration), and its bootstrap's
    resamples and seed."""
    calibrating = {d.name: d for d in designs() if d.calibration is not None}
    design = calibrating.get(name)
    if design is None or design.calibration is None:
        raise click.BadParameter(
            f"no design {name!r} calibrates its judge against people "
            f"(those that do: {', '.join(calibrating) or 'none'})",
            param_hint="--experiment",
        )
    require_params_file()
    rows: CalibrationRows = load_ref(design.calibration)(design.load_params())
    return list(rows.scores), list(rows.humans), rows.resamples, rows.seed


@click.command(name="calibrate")
@click.option(
    "--scores",
    "scores_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Judge scores, JSONL: item, group, system, metric, score[, weighted_score].",
)
@click.option(
    "--human",
    "human_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Human ratings, JSONL: item, metric, ratings.",
)
@click.option(
    "--experiment",
    metavar="DESIGN",
    help="Instead of the two files: a design's own judgements and its corpus's ratings (e.g. summeval).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the results as canonical JSON.")
@click.option("--seed", type=int, help="Seed of the bootstrap.  [default: 0, or the experiment's]")
@click.option(
    "--resamples",
    type=click.IntRange(min=1),
    help="Bootstrap resamples.  [default: 1000, or the experiment's]",
)
def calibrate(
    scores_path: Path | None,
    human_path: Path | None,
    experiment: str | None,
    as_json: bool,
    seed: int | None,
    resamples: int | None,
) -> None:
    """How far a judge's scores agree with human ratings: Spearman, Kendall tau-b and Pearson at
    summary, system and global level with bootstrap intervals; Krippendorff's alpha.

    \b
    Examples:
      judgeloop calibrate --experiment summeval        the SummEval design's own judgements
      judgeloop calibrate --scores scores.jsonl --human human.jsonl --json
    """
    if experiment is not None:
        if scores_path is not None or human_path is not None:
            raise click.UsageError("give either --experiment or --scores and --human, not both")
        scores, humans, default_resamples, default_seed = _experiment_rows(experiment)
        scores_source, human_source = f"experiment {experiment}", f"experiment {experiment}'s corpus"
    elif scores_path is None or human_path is None:
        raise click.UsageError("give --scores and --human (two JSONL files), or --experiment NAME")
    else:
        scores, humans = read_scores(scores_path), read_human(human_path)
        if not scores:
            raise InputError(str(scores_path), None, "no score rows", SCORES_FIX)
        default_resamples, default_seed = 1000, 0
        scores_source, human_source = str(scores_path), str(human_path)
    resamples = default_resamples if resamples is None else resamples
    seed = default_seed if seed is None else seed
    results = calibrate_rows(scores, humans, resamples=resamples, seed=seed)
    calibrated = {r.metric for r in results}
    missing = sorted({s.metric for s in scores} - calibrated)
    if missing:
        raise InputError(
            human_source,
            None,
            f"no item of metric(s) {', '.join(missing)} has a human rating",
            f"check that the item ids and metric names match those of {scores_source}",
        )
    if as_json:
        click.echo(canonical_json(calibration_data(results, resamples=resamples, seed=seed)))
    else:
        echo(render_table(results, resamples=resamples, seed=seed))  # metric names are the files': escaped
