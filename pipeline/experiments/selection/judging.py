"""The LLM judge of the selection: a 1-5 rating per criterion, and a pairwise comparison.

Both are schema-constrained (pipeline.llm.structured): the reply is a small JSON object, the reason
first so the rating follows from it, and no `maxLength` (it makes llama.cpp's grammar slow); the
stage's num_predict bounds the reason instead. A reply that does not validate is re-asked with the
problem named, up to `max_attempts` calls, then returned as a StructuredFailure: the caller records
it and leaves the criterion unscored, never a default rating.

Prompts put what every candidate of a request shares first (the request, the criterion) and the
track last, so the embedded backend re-uses the shared prefix from one call to the next.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from pipeline.data.catalog import Track
from pipeline.data.listening_requests import Criterion, ListeningRequest
from pipeline.judges.likert import LIKERT_MAX, LIKERT_MIN
from pipeline.llm.structured import ChatSession, Structured, StructuredFailure, ask_structured
from pipeline.llm.types import CallContext, Message, Options

RATER_SYSTEM = (
    "You are a music curator. You judge how well one track suits a listener's request, "
    "on one criterion at a time, and answer in JSON."
)
COMPARER_SYSTEM = (
    "You are a music curator. You compare two tracks for a listener's request and answer in JSON."
)


class RatingReply(BaseModel):
    """The judge's reply for one candidate and one criterion."""

    reason: str
    # The scale's bounds, not LikertScore: its schema (an enum) would change the recorded calls' keys.
    rating: int = Field(ge=LIKERT_MIN, le=LIKERT_MAX)


class PairwiseReply(BaseModel):
    """The judge's reply for two candidates shown as A and B."""

    reason: str
    better: Literal["A", "B"]


def describe_track(track: Track) -> str:
    """What the judge is shown of a track: the catalog's words and numbers, nothing added."""
    return (
        f'"{track.track_name}" by {track.track_artist} ({track.release_year}); '
        f"genre {track.genre}, subgenre {track.subgenre}; "
        f"energy {track.energy:.2f}, valence {track.valence:.2f}, tempo {track.tempo:.0f} BPM, "
        f"acousticness {track.acousticness:.2f}, instrumentalness {track.instrumentalness:.2f}, "
        f"popularity {track.track_popularity}/100"
    )


def rating_messages(
    request: ListeningRequest, name: str, criterion: Criterion, track: Track
) -> list[Message]:
    user = (
        f"Listener's request: {request.text}\n"
        f"Criterion, {name}: {criterion.description}\n"
        "Rate the track on this criterion only, from 1 (poor) to 5 (excellent). "
        "Reply in JSON with a one-sentence reason about this track, then the rating.\n\n"
        f"Track: {describe_track(track)}"
    )
    return [Message(role="system", content=RATER_SYSTEM), Message(role="user", content=user)]


def comparison_messages(request: ListeningRequest, first: Track, second: Track) -> list[Message]:
    user = (
        f"Listener's request: {request.text}\n"
        "Which of the two tracks suits the request better? "
        "Reply in JSON with a one-sentence reason, then the better track: A or B.\n\n"
        f"Track A: {describe_track(first)}\n"
        f"Track B: {describe_track(second)}"
    )
    return [Message(role="system", content=COMPARER_SYSTEM), Message(role="user", content=user)]


def rate(
    session: ChatSession,
    request: ListeningRequest,
    name: str,
    criterion: Criterion,
    track: Track,
    options: Options,
    max_attempts: int,
) -> Structured[RatingReply] | StructuredFailure:
    context = CallContext(
        stage="select_score", item=request.id, labels={"candidate": track.track_id, "criterion": name}
    )
    messages = rating_messages(request, name, criterion, track)
    return ask_structured(session, messages, RatingReply, options, context, max_attempts=max_attempts)


def compare(
    session: ChatSession,
    request: ListeningRequest,
    first: Track,
    second: Track,
    options: Options,
    max_attempts: int,
) -> Structured[PairwiseReply] | StructuredFailure:
    """`first` shown as A, `second` as B; the context's `order` names them in that order."""
    context = CallContext(
        stage="select_pick",
        item=request.id,
        labels={"candidate": first.track_id, "order": f"{first.track_id}>{second.track_id}"},
    )
    messages = comparison_messages(request, first, second)
    return ask_structured(session, messages, PairwiseReply, options, context, max_attempts=max_attempts)
