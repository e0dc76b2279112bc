"""Why a judgement changed (pipeline.tools.diff.causes), on calls made by hand: the cause named is
the first that holds in the documented order (input, prompt, model, sampling, samples, reply, ...),
and whatever else also moved is named beside it. The committed second run changed the temperature
(0 -> 0.7) and the number of samples (1 -> 3) at once; its changes were blamed on the samples alone."""

from __future__ import annotations

from pipeline.experiments.judgements import Judgement
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import CallContext, ChatReply, ChatRequest, Message, ModelIdentity, Options
from pipeline.tools.diff.causes import cause_of
from pipeline.tools.diff.page import render_page
from pipeline.tools.diff.runs import Run
from pipeline.tools.diff.summary import summarise
from pipeline.tools.diff.text import side_by_side


def _call(reply: str, *, temperature: float = 0.0, model: str = "m", sample: int = 0) -> RecordedCall:
    """A judge call; sample i with its own seed, as judge.samples derives them (so its own key)."""
    request = ChatRequest(
        messages=(Message(role="user", content="Rate this."),),
        options=Options(temperature=temperature, seed=42 + sample),
    )
    identity = ModelIdentity(backend="fake", name=model, digest="d")
    record = CallRecord.new(identity, request, ChatReply(text=reply, done_reason="stop"))
    labels = {"sample": str(sample)} if sample else {}
    return RecordedCall(context=CallContext(stage="judge", item="1", step=0, labels=labels), record=record)


def _judged(calls: list[RecordedCall], score: float) -> tuple[Judgement, dict[str, RecordedCall]]:
    samples = tuple(float(c.record.reply.text[-1]) for c in calls) if len(calls) > 1 else ()
    keys = tuple(c.record.key for c in calls)
    judgement = Judgement("paper", "1", 0, "accuracy", score, score > 3, keys, samples=samples, threshold=3)
    return judgement, {c.record.key: c for c in calls}


def test_a_new_temperature_with_more_samples_names_both() -> None:
    a, calls_a = _judged([_call("Score: 1")], 1.0)
    b, calls_b = _judged(
        [_call(f"Score: {s}", temperature=0.7, sample=i) for i, s in enumerate((4, 5, 5))], 14 / 3
    )
    found = cause_of(a, b, calls_a, calls_b)
    assert (found.kind, found.also) == ("sampling", ("samples",))
    assert "temperature 0.0 → 0.7" in found.detail


def test_a_new_model_with_more_samples_is_the_model_s() -> None:
    a, calls_a = _judged([_call("Score: 1")], 1.0)
    b, calls_b = _judged([_call(f"Score: {s}", model="n", sample=i) for i, s in enumerate((4, 5, 5))], 14 / 3)
    found = cause_of(a, b, calls_a, calls_b)
    assert (found.kind, found.also) == ("model", ("samples",))


def test_more_samples_alone_are_the_samples() -> None:
    a, calls_a = _judged([_call("Score: 1")], 1.0)
    b, calls_b = _judged([_call(f"Score: {s}", sample=i) for i, s in enumerate((1, 5, 5))], 11 / 3)
    found = cause_of(a, b, calls_a, calls_b)
    assert (found.kind, found.also) == ("samples", ())


def test_a_first_sample_s_new_reply_is_the_reply_not_its_reading() -> None:
    # Three samples each; the first replied otherwise, the last the same: the reply changed, and the
    # score with it. Comparing the last call's reply alone called it "the same reply, read as
    # another score".
    a, calls_a = _judged([_call(f"Score: {s}", sample=i) for i, s in enumerate((1, 4, 4))], 3.0)
    b, calls_b = _judged([_call(f"Score: {s}", sample=i) for i, s in enumerate((4, 4, 4))], 4.0)
    found = cause_of(a, b, calls_a, calls_b)
    assert found.kind == "reply"
    # One key in both runs (the same request), each run's recording its own answer: said, with when.
    first_a, first_b = calls_a[a.keys[0]].record, calls_b[b.keys[0]].record
    assert first_a.key == first_b.key
    assert (
        found.detail
        == f"one request, two recorded answers (made {first_a.created_at} and {first_b.created_at})"
    )


def test_the_item_view_shows_every_sample_s_reply() -> None:
    """B's score is the mean of three samples; the --item view and the page showed the last
    sample's reply alone, as "the one read", beside a score none of its replies gave."""
    a, calls_a = _judged([_call("Score: 1")], 1.0)
    b, calls_b = _judged([_call(f"Score: {s}", sample=i) for i, s in enumerate((2, 4, 5))], 11 / 3)
    shown = side_by_side(a, b, (calls_a, calls_b), "why")
    assert all(f"+Score: {s}" in shown for s in (2, 4, 5)), shown
    page = render_page(
        ["A", "B"],
        *summarise(Run("A", {a.pair_key: a}, calls_a), Run("B", {b.pair_key: b}, calls_b), resamples=100),
        (calls_a, calls_b),
    )
    assert all(f"Score: {s}" in page for s in (2, 4, 5))
