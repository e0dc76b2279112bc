"""The LLM judge of the selection: a 1-5 rating per criterion, and a pairwise comparison.

Both are schema-constrained (pipeline.llm.structured): the reply is a small JSON object, the reason
first so the rating follows from it, and no `maxLength` (it makes llama.cpp's grammar slow); the
stage's num_predict bounds the reason instead. A reply that does not validate is re-asked with the
problem named, up to `max_attempts` calls, then an unscored Judgement: the caller records it and
leaves the criterion unscored, never a default rating.

Prompts put what every candidate of a request shares first (the request, the criterion) and the
track last, so the embedded backend re-uses the shared prefix from one call to the next.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

from pipeline.data.catalog import Track
from pipeline.data.listening_requests import Criterion, ListeningRequest
from pipeline.judges.judgement import Judgement, from_structured
from pipeline.judges.likert import LIKERT_MAX, LIKERT_MIN
from pipeline.llm.structured import ChatSession, StructuredResult, ask_structured
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


@dataclass(frozen=True)
class CandidateOnCriterion:
    """What the rating judge is asked about: one candidate of a request, on one judged criterion."""

    request: ListeningRequest
    name: str
    criterion: Criterion
    track: Track

    def context(self) -> CallContext:
        labels = {"candidate": self.track.track_id, "criterion": self.name}
        return CallContext(stage="select_score", item=self.request.id, labels=labels)


@dataclass(frozen=True)
class CandidatePair:
    """What the pairwise judge is asked about: two candidates of a request, `first` shown as A."""

    request: ListeningRequest
    first: Track
    second: Track

    def context(self) -> CallContext:
        """The context's `order` names the two in the order shown."""
        order = f"{self.first.track_id}>{self.second.track_id}"
        labels = {"candidate": self.first.track_id, "order": order}
        return CallContext(stage="select_pick", item=self.request.id, labels=labels)


class CriterionJudge:
    """A Judge[CandidateOnCriterion, int]: the candidate's 1-5 rating on the criterion, with its reason."""

    def __init__(self, session: ChatSession, options: Options, max_attempts: int) -> None:
        self.session, self.options, self.max_attempts = session, options, max_attempts

    def __call__(self, subject: CandidateOnCriterion, context: CallContext) -> Judgement[int]:
        messages = rating_messages(subject.request, subject.name, subject.criterion, subject.track)
        result = ask_structured(
            self.session, messages, RatingReply, self.options, context, max_attempts=self.max_attempts
        )
        return rating_judgement(result)


class PairwiseJudge:
    """A Judge[CandidatePair, str]: the id of the track the judge preferred, with its reason."""

    def __init__(self, session: ChatSession, options: Options, max_attempts: int) -> None:
        self.session, self.options, self.max_attempts = session, options, max_attempts

    def __call__(self, subject: CandidatePair, context: CallContext) -> Judgement[str]:
        messages = comparison_messages(subject.request, subject.first, subject.second)
        result = ask_structured(
            self.session, messages, PairwiseReply, self.options, context, max_attempts=self.max_attempts
        )
        return comparison_judgement(result, subject.first.track_id, subject.second.track_id)


def rating_judgement(result: StructuredResult[RatingReply]) -> Judgement[int]:
    """The judgement of a rating reply, by CriterionJudge and by `judgeloop audit` alike (replies.py)."""
    return from_structured(result, lambda reply: reply.rating, lambda reply: reply.reason)


def comparison_judgement(result: StructuredResult[PairwiseReply], first: str, second: str) -> Judgement[str]:
    """The judgement of a comparison reply: the id of the track preferred, `first` shown as A."""
    shown = {"A": first, "B": second}
    return from_structured(result, lambda reply: shown[reply.better], lambda reply: reply.reason)
