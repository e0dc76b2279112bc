"""A stage's items (pipeline.llm.runner): on workers where a model answers, one after another in the
caller's thread in a replay, and the same results, order, ranks and errors either way."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from pipeline.errors import ReplayMissError
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.runner import iter_items, run_items
from pipeline.llm.scheduling import ITEM_RANK
from pipeline.llm.session import LLMSession
from tests.helpers import make_session


@pytest.fixture(params=["on workers", "in turn"])
def session(request: pytest.FixtureRequest, tmp_path: Path) -> LLMSession:
    if request.param == "on workers":  # a server with four slots: eight items side by side
        made, _ = make_session(tmp_path, "auto", backend=FakeBackend(parallelism=4))
        assert made.calls_at_once and made.workers == 8
    else:  # a replay
        made, _ = make_session(tmp_path, "replay")
        assert not made.calls_at_once and made.workers == 1
    return made


def test_items_come_out_in_their_order_each_run_once_with_its_rank(session: LLMSession) -> None:
    ran: list[int] = []

    def work(item: int) -> tuple[int, int]:
        ran.append(item)
        return item, ITEM_RANK.get()

    ITEM_RANK.set(99)
    try:
        assert run_items(session, list(range(20)), work, "judge") == [(i, i) for i in range(20)]
        assert ITEM_RANK.get() == 99  # an item's rank stays its own
    finally:
        ITEM_RANK.set(0)
    assert sorted(ran) == list(range(20))


def test_a_miss_stops_only_its_item_and_every_later_item_still_runs(session: LLMSession) -> None:
    ran: list[int] = []

    def work(item: int) -> int:
        ran.append(item)
        if item in (1, 3):
            raise ReplayMissError(f"jl2:{item}", None)
        return item

    assert run_items(session, list(range(6)), work, "judge") == [0, 2, 4, 5]
    assert sorted(ran) == list(range(6))


def test_another_error_stops_the_stage_after_the_items_before_it(session: LLMSession) -> None:
    yielded: list[int] = []

    def work(item: int) -> int:
        if item == 4:
            raise ValueError("boom")
        return item

    with pytest.raises(ValueError, match="boom"):
        for result in iter_items(session, range(40), work, "judge"):
            yielded.append(result)
    assert yielded == list(range(len(yielded))) and len(yielded) <= 4  # none after the failure


def test_a_replay_runs_its_items_in_the_callers_thread_one_after_another(tmp_path: Path) -> None:
    session, _ = make_session(tmp_path, "replay")
    here, running = threading.get_ident(), [0]

    def work(item: int) -> bool:
        running[0] += 1
        alone = running[0] == 1
        running[0] -= 1
        return alone and threading.get_ident() == here

    assert run_items(session, list(range(10)), work, "judge") == [True] * 10
