"""How the SummEval design reads a recorded judge reply (Design.reads): `{"score": N}` validated as
the judge step validated it (judge.reply_judgement of the one call), with G-Eval's weighted score
rounded as the step wrote it, so that `judgeloop audit` shows each call's row of the results."""

from __future__ import annotations

from pydantic import BaseModel

from pipeline.experiments.summeval.judge import reply_judgement, weighted_score
from pipeline.experiments.summeval.results import SummEvalReply
from pipeline.judges.call_reading import CallReader, CallReading, of_judgement
from pipeline.llm.records import CallRecord
from pipeline.llm.structured import read_attempt
from pipeline.llm.types import CallContext


def call_reading(record: CallRecord) -> CallReading:
    judgement = reply_judgement(read_attempt(record, SummEvalReply))
    distribution = judgement.distributions.get("score")
    weighted = {} if distribution is None else {"score": weighted_score(distribution)}
    return of_judgement(judgement, judgement.value, weighted=weighted)


def reads(params: BaseModel | None) -> CallReader:
    """Every call of the summeval_judge stage is a judge call; no setting changes how one is read."""

    def read(context: CallContext, record: CallRecord) -> CallReading | None:
        return call_reading(record)

    return read
