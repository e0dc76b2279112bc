"""A stage's dry run (the progress line's prediction) runs beside the stage's real calls, which
hold the shared side-by-side pool's threads while they wait at the model. The dry run waits on no
model, so its calls must not queue behind them: else the prediction came at the stage's end."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from pipeline.llm import scheduling
from pipeline.llm.key_table import KeyTable
from pipeline.llm.session import LLMSession, RecordingIndex
from pipeline.llm.types import CallContext, ChatRequest, Message, ModelIdentity, Options
from pipeline.tools.status.dry_results import KEPT, Kept
from pipeline.tools.status.probe import probe_stage

MODEL = ModelIdentity(backend="openai", name="m", digest="rev-1")


def _request(item: int, metric: int) -> ChatRequest:
    text = f"item {item}, metric {metric}"
    return ChatRequest(messages=(Message(role="user", content=text),), options=Options())


def _judge_like(session: LLMSession) -> list[Kept]:
    """Each item's four metrics asked side by side, as the rubric judge asks them."""
    for item in range(3):

        def ask(metric: int, item: int = item) -> None:
            context = CallContext(stage="judge", item=str(item)).at(metric=str(metric))
            session.chat(_request(item, metric), context)

        scheduling.side_by_side(
            [lambda m=m: ask(m) for m in range(4)],  # type: ignore[misc]
            at_once=session.calls_at_once,
        )
    return [Kept(str(item), True) for item in range(3)]


def test_a_dry_run_finishes_while_the_real_calls_hold_every_pool_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = scheduling.RankedPool(1)
    monkeypatch.setattr(scheduling, "_threads", lambda: pool)
    at_the_model = threading.Event()
    answered = threading.Event()

    def real_call() -> None:  # the real stage's call, waiting for the model's reply
        at_the_model.set()
        answered.wait(30)

    held = pool.submit(0, real_call)
    assert at_the_model.wait(10)
    predicted: list[int] = []

    def dry_run() -> None:
        probe = probe_stage(
            "judge",
            _judge_like,
            [str(item) for item in range(3)],
            KEPT,
            identity=MODEL,
            index=RecordingIndex(tmp_path / "recordings"),
            cache_dir=tmp_path / "no-cache",
            counted=KeyTable(),
        )
        predicted.append(len(probe.model_calls))

    beside = threading.Thread(target=dry_run, daemon=True)
    beside.start()
    try:
        # Not a timing: with the dry run's calls queued behind the held thread it never ends
        # until the model answers; 20 s is only how long the test waits to say so.
        beside.join(20)
        assert predicted == [12], "the dry run waited for a thread the real calls hold"
    finally:
        answered.set()
        held.result(10)
        beside.join(10)
        pool.shutdown()
