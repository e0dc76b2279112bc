"""The RAG judge's judgement unit for `judgeloop diff`: one row's score on one dimension (1-5). One
call scores every dimension of a row, so a row's dimensions share their calls; a row that failed
every attempt is unscored on each. The judge reads fixed data (the row's question, sources and
answer): no upstream stage, and no pass threshold.
"""

from __future__ import annotations

from collections.abc import Iterator

from pipeline.data.jsonl import read_jsonl
from pipeline.experiments.judgements import Judgement, RunFiles
from pipeline.experiments.rag.judge import RagJudgement
from pipeline.experiments.rag.params import RagParams
from pipeline.judges.structured.judge import ScoredDimensions


def judgements(params: RagParams, run: RunFiles) -> Iterator[Judgement]:
    path = run.path(params.rag.out)
    if not path.is_file():
        return
    names = [d.name for d in params.rag.dimensions.items]
    for row in read_jsonl(path, RagJudgement):
        judged = row.judgement
        for name in names:
            scored = judged.dimensions.get(name) if isinstance(judged, ScoredDimensions) else None
            yield Judgement(
                design="rag",
                item=row.item,
                iteration=0,
                metric=name,
                score=None if scored is None else scored.score,
                passed=None,
                keys=judged.call_keys,
                samples=(row.samples or {}).get(name, ()),
            )
