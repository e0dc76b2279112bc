"""How the regenerate design reads a recorded reply (Design.reads): an evaluator call (role
`evaluate`, in regen_evaluate and regen_regenerate) as its stage read it
(pipeline.judges.quality.evaluator.call_reading): the quality on 0-1 the policy compares with its
threshold, the grades, or the failure. A generation is read for no score."""

from __future__ import annotations

from pydantic import BaseModel

from pipeline.judges.call_reading import CallReader, CallReading
from pipeline.judges.quality.evaluator import call_reading
from pipeline.llm.records import CallRecord
from pipeline.llm.types import CallContext


def reads(params: BaseModel | None) -> CallReader:
    """No setting changes how an evaluation is read."""

    def read(context: CallContext, record: CallRecord) -> CallReading | None:
        return call_reading(record) if context.label("role") == "evaluate" else None

    return read
