"""How the paper's design reads a recorded judge reply (Design.reads): exactly as its judge stage read
it, through pipeline.judges.rubric.judge.reply_reader with the judge settings of params.yaml (a free
reply by the extractor, a schema-constrained one by its schema), so that `judgeloop audit` shows the
score the numbers were computed from."""

from __future__ import annotations

from functools import partial

from pydantic import BaseModel

from pipeline.judges.call_reading import CallReader
from pipeline.judges.rubric.judge import judge_call_reading
from pipeline.judges.rubric.settings import JudgeSettings


def reads(params: BaseModel | None) -> CallReader:
    """(call context, call record) -> the judge stage's reading, None for a call that is not a judge
    call. `params`: params.yaml as the tools read it (its `judge` section), or None where there is
    none (a recordings folder audited on its own): the judge's defaults then."""
    settings = getattr(params, "judge", None)
    return partial(
        judge_call_reading, settings=settings if isinstance(settings, JudgeSettings) else JudgeSettings()
    )
