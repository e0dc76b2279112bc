"""How the selection design reads a recorded judge reply (Design.reads), by the judges' own code
(judging.rating_judgement, judging.comparison_judgement of the one call): a rating call as the 0-1
score its criterion got (criteria.judged_score) with the rating the model wrote; a comparison as the
id of the track preferred, A and B named by the call's `order` label as the pick step showed them."""

from __future__ import annotations

from pydantic import BaseModel

from pipeline.experiments.selection.criteria import judged_score
from pipeline.experiments.selection.judging import (
    PairwiseReply,
    RatingReply,
    comparison_judgement,
    rating_judgement,
)
from pipeline.judges.call_reading import CallReader, CallReading, of_judgement
from pipeline.llm.records import CallRecord
from pipeline.llm.structured import read_attempt
from pipeline.llm.types import CallContext


def rating_reading(context: CallContext, record: CallRecord) -> CallReading | None:
    criterion = context.label("criterion")
    if criterion is None:
        return None
    judgement = rating_judgement(read_attempt(record, RatingReply))
    if judgement.value is None:
        return of_judgement(judgement, None)
    scored = judged_score(criterion, judgement.value, (record.key,))
    return of_judgement(judgement, scored.score, {"rating": judgement.value})


def comparison_reading(context: CallContext, record: CallRecord) -> CallReading | None:
    first, sep, second = (context.label("order") or "").partition(">")
    if not sep:
        return None
    judgement = comparison_judgement(read_attempt(record, PairwiseReply), first, second)
    return of_judgement(judgement, judgement.value)


_BY_STAGE = {"select_score": rating_reading, "select_pick": comparison_reading}


def reads(params: BaseModel | None) -> CallReader:
    """No setting changes how a reply is read."""

    def read(context: CallContext, record: CallRecord) -> CallReading | None:
        reader = _BY_STAGE.get(context.stage)
        return None if reader is None else reader(context, record)

    return read
