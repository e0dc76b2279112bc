"""SummEval's judgement unit for `judgeloop diff`: one summary (item "<article>/<system>") on one
dimension. Its rows do not name their calls; they are found in the recordings by the question's
context (stage, item, the dimension as its metric). The judge reads fixed data, so there is no
upstream stage to blame, and no pass threshold (a calibration judge: its scores are compared with
people's ratings, not gated).
"""

from __future__ import annotations

from collections.abc import Iterator

from pipeline.data.jsonl import read_jsonl
from pipeline.experiments.judgements import Judgement, RunFiles
from pipeline.experiments.summeval.judge import STAGE
from pipeline.experiments.summeval.params import SummEvalParams
from pipeline.experiments.summeval.results import SummEvalJudgement


def judgements(params: SummEvalParams, run: RunFiles) -> Iterator[Judgement]:
    path = run.path(params.summeval.out)
    if not path.is_file():
        return
    for row in read_jsonl(path, SummEvalJudgement):
        yield Judgement(
            design="summeval",
            item=row.item,
            iteration=0,
            metric=row.dimension,
            score=row.score,
            passed=None,
            keys=run.keys_where(STAGE, row.item, 0, metric=row.dimension),
            samples=row.samples or (),
        )
