"""How the RAG design reads a recorded judge reply (Design.reads): parsed and validated against the
reply model of params.yaml's rag.dimensions, by the structured judge's own code
(pipeline.judges.structured.judge.call_reading), so that `judgeloop audit` shows what the stage
wrote: the overall score, each dimension's, the confidence, or the failure."""

from __future__ import annotations

from pydantic import BaseModel

from pipeline.experiments.rag.settings import RagSettings
from pipeline.judges.call_reading import CallReader, CallReading
from pipeline.judges.structured.judge import call_reading
from pipeline.llm.records import CallRecord
from pipeline.llm.types import CallContext


def reads(params: BaseModel | None) -> CallReader:
    """Every call of the rag_judge stage is a judge call. `params`: params.yaml as the tools read it,
    or None (the design's default dimensions)."""
    settings = getattr(params, "rag", None)
    dimensions = (settings if isinstance(settings, RagSettings) else RagSettings()).dimensions

    def read(context: CallContext, record: CallRecord) -> CallReading | None:
        return call_reading(record, dimensions)

    return read
