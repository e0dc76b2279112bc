"""The SummEval calibrate step: the judge's rows and the people's ratings, joined and measured.

`experiment_rows` is also what `judgeloop calibrate --experiment summeval` reads: the judge step's
own output and the corpus's ratings, with no export step between.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.data.jsonl import read_jsonl
from pipeline.data.ratings import HumanRatings, JudgedItem
from pipeline.data.recorded_calls import stage_call_counts
from pipeline.data.recorded_models import recorded_models
from pipeline.data.summeval import human_ratings, load_summeval, subset
from pipeline.experiments.summeval.params import SummEvalParams
from pipeline.experiments.summeval.results import SummEvalJudgement
from pipeline.llm.recordings.verified_memo import VerifiedMemo
from pipeline.stats.calibration import MetricCalibration, calibrate, calibration_data


@dataclass(frozen=True)
class ExperimentRows:
    judgements: list[SummEvalJudgement]
    scores: list[JudgedItem]
    humans: list[HumanRatings]


def judge_scores(judgements: Sequence[SummEvalJudgement]) -> list[JudgedItem]:
    return [
        JudgedItem(
            item=j.item,
            group=j.document,
            system=j.system,
            metric=j.dimension,
            score=None if j.score is None else float(j.score),
            weighted_score=j.weighted_score,
        )
        for j in judgements
    ]


def experiment_rows(params: SummEvalParams) -> ExperimentRows:
    """The judge step's rows (summeval.out) and the corpus's ratings of the same summaries."""
    settings = params.summeval
    judgements = read_jsonl(Path(settings.out), SummEvalJudgement)
    corpus = subset(load_summeval(Path(settings.corpus)), settings.documents)
    humans = human_ratings(corpus, settings.dimensions, settings.annotators)
    return ExperimentRows(judgements, judge_scores(judgements), humans)


# The design's LLM stage, whose recorded calls the metrics count (pipeline.data.recorded_calls).
LLM_STAGES = ("summeval_judge",)


def judge_outcomes(judgements: Sequence[SummEvalJudgement]) -> dict[str, dict[str, int]]:
    """Per dimension: the calls made (re-asks included, as `judgeloop audit` lists them), scored
    rows, unscored rows by failure kind, rows scored after a re-ask, and rows whose reply carried no
    usable log-probabilities (no weighted score)."""
    out: dict[str, Counter[str]] = {}
    for j in judgements:
        counts = out.setdefault(j.dimension, Counter())
        counts["calls_judged"] += j.attempts
        if j.score is None:
            counts[f"unscored_{j.failure}"] += 1
        else:
            counts["scored"] += 1
            counts["scored_after_reask"] += j.attempts > 1
            counts["scored_without_logprobs"] += j.weighted_score is None
    return {dimension: dict(sorted(counts.items())) for dimension, counts in out.items()}


def _judge_model(params: SummEvalParams) -> dict[str, Any]:
    """The model its recorded calls name (not params.yaml's): the one that made the most calls, and
    every model with its count when several did."""
    memo = VerifiedMemo.beside(Path(params.cache.dir))  # verified in full before: not again
    uses = recorded_models(Path(params.cache.recordings), LLM_STAGES, memo)
    if not uses:
        return {"backend": None, "model": None}
    named: dict[str, Any] = {"backend": uses[0].backend, "model": uses[0].name}
    if len(uses) > 1:
        named["models"] = {use.label: use.calls for use in uses}
    return named


def summeval_metrics(
    params: SummEvalParams, rows: ExperimentRows
) -> tuple[list[MetricCalibration], dict[str, Any]]:
    """The calibration and metrics.json's content: the model, the subset, the judge's outcomes."""
    settings = params.summeval
    results = calibrate(rows.scores, rows.humans, resamples=settings.resamples, seed=settings.seed)
    data = calibration_data(results, resamples=settings.resamples, seed=settings.seed)
    data["judge"] = {**_judge_model(params), "outcomes": judge_outcomes(rows.judgements)}
    data["recorded_calls"] = stage_call_counts(Path(params.cache.recordings), LLM_STAGES)
    data["subset"] = {
        "documents": len({j.document for j in rows.judgements}),
        "systems": len({j.system for j in rows.judgements}),
        "dimensions": list(settings.dimensions),
        "annotators": settings.annotators,
    }
    return results, data


PLOT_FIELDS = ("item", "dimension", "human_mean", "judge_score", "judge_weighted")


def plot_csv(rows: ExperimentRows) -> str:
    """One line per scored row: the mean human rating beside the judge's two scores (DVC scatter)."""
    humans = {(h.item, h.metric): h for h in rows.humans}
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(PLOT_FIELDS)
    for j in rows.judgements:
        human = humans.get((j.item, j.dimension))
        if j.score is None or human is None:
            continue
        weighted = "" if j.weighted_score is None else f"{j.weighted_score:.6f}"
        writer.writerow([j.item, j.dimension, f"{human.mean:.6f}", j.score, weighted])
    return buffer.getvalue()
