"""A stage's results streamed to its output (issue 33): handed on in the items' order as soon as an
item and those before it are done (pipeline.llm.runner.iter_items), with a small reorder buffer, and
written as they come (pipeline.data.jsonl.write_jsonl), whole or not at all, with the bytes that
sorting them all would give."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.data.jsonl import Result, write_jsonl, write_records
from pipeline.experiments.paper import refine as paper_refine
from pipeline.llm import runner
from pipeline.llm.runner import iter_items
from pipeline.llm.types import CallContext
from pipeline.loops.feedback import refine as original
from stages.runner import StagedResults, run_stage
from tests.helpers import make_session, request
from tests.project import TRANSCRIPTS, one_round_project, rejudge_all


class Row(Result):
    item: str
    value: int


def test_results_come_out_in_the_items_order_while_later_items_still_run(tmp_path: Path) -> None:
    session, _ = make_session(tmp_path)
    received = threading.Event()  # item 0 has reached the consumer
    held_up: list[bool] = []

    def work(i: int) -> int:
        if i == 1:  # finishes only once item 0 is out: a runner that returns a list would stall here
            held_up.append(not received.wait(timeout=10))
        elif i > 1:
            time.sleep(0.01 * (6 - i))  # later items finish first
        return i

    out = []
    for result in iter_items(session, list(range(6)), work, "judge"):
        out.append(result)
        received.set()
    assert out == list(range(6))
    assert held_up == [False]


def test_a_slow_item_holds_up_at_most_a_window_of_later_ones(tmp_path: Path) -> None:
    session, _ = make_session(tmp_path)
    started: list[int] = []
    before_first: list[int] = []

    def work(i: int) -> int:
        started.append(i)
        if i == 0:
            time.sleep(0.5)
            before_first.append(len(started))
        return i

    assert list(iter_items(session, list(range(200)), work, "judge")) == list(range(200))
    assert before_first[0] <= session.workers * runner.WINDOW


def test_an_item_that_fails_stops_the_stream_after_the_results_before_it(tmp_path: Path) -> None:
    session, _ = make_session(tmp_path)

    def work(i: int) -> int:
        if i == 3:
            time.sleep(0.3)  # the items before it are out by then
            raise ValueError("item 3 broke")
        return i

    out: list[int] = []
    with pytest.raises(ValueError, match="item 3 broke"):
        for result in iter_items(session, list(range(8)), work, "judge"):
            out.append(result)
    assert out == [0, 1, 2]  # and none after it: the stage's output is not published


def _sorted_bytes(path: Path, rows: list[Row]) -> bytes:
    """What write_jsonl wrote before it streamed: every result held, sorted (stably) by item."""
    write_records(path, (r.model_dump(mode="json") for r in sorted(rows, key=lambda r: r.item)))
    return path.read_bytes()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["1", "10", "2", "901", "902", "a", ""]), st.integers(0, 5))))
def test_streamed_results_in_any_order_give_the_bytes_of_sorting_them_all(
    tmp_path_factory: pytest.TempPathFactory, pairs: list[tuple[str, int]]
) -> None:
    folder = tmp_path_factory.mktemp("rows")
    rows = [Row(item=item, value=value) for item, value in pairs]
    write_jsonl(folder / "streamed.jsonl", iter(rows))
    assert (folder / "streamed.jsonl").read_bytes() == _sorted_bytes(folder / "sorted.jsonl", rows)
    assert sorted(p.name for p in folder.iterdir()) == ["sorted.jsonl", "streamed.jsonl"]


@pytest.mark.parametrize("late", [False, True])
def test_a_stage_that_fails_part_way_leaves_the_old_output_and_no_stray_file(
    tmp_path: Path, late: bool
) -> None:
    path = tmp_path / "out" / "results.jsonl"
    path.parent.mkdir()
    path.write_text("the old output\n", encoding="utf-8")

    def results() -> Iterator[Row]:
        yield Row(item="901", value=1)
        yield Row(item="800" if late else "902", value=2)  # late: held to be merged in at the end
        raise RuntimeError("the stage failed")

    with pytest.raises(RuntimeError, match="the stage failed"):
        write_jsonl(path, results())
    assert path.read_text(encoding="utf-8") == "the old output\n"
    assert [p.name for p in path.parent.iterdir()] == ["results.jsonl"]


def test_a_rerun_after_an_item_failed_mid_stage_resumes_from_the_cache(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    items = [f"9{i:02d}" for i in range(12)]
    sent: list[int] = []

    def stage(broken: str | None) -> None:
        session, fake = make_session(tmp_path)

        def work(item: str) -> Row:
            if item == broken:
                raise ValueError(f"{item} broke")
            reply = session.chat(request(f"judge {item}"), CallContext(stage="judge", item=item))
            return Row(item=item, value=len(reply.record.reply.text))

        try:
            write_jsonl(path, iter_items(session, items, work, "judge"))
        finally:
            sent.append(len(fake.calls))
            session.close(write_recording=False)

    with pytest.raises(ValueError, match="905 broke"):
        stage("905")
    assert not path.exists()  # nothing of the failed stage was published
    assert 5 <= sent[0] < len(items)  # the items before it finished; no new item started after it
    stage(None)
    assert sent[1] == len(items) - sent[0]  # every call that completed came from the cache
    assert [
        Row.model_validate_json(line).item for line in path.read_text(encoding="utf-8").splitlines()
    ] == items


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return one_round_project(tmp_path, monkeypatch)


def _outputs(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / "outputs").rglob("*")) if p.is_file()}


def test_a_replayed_stage_publishes_its_dry_runs_streamed_results_byte_identically(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _outputs(project)
    published: list[Path] = []
    publish = StagedResults.publish

    def spied(staged: StagedResults) -> None:
        published.append(staged.target)
        publish(staged)

    monkeypatch.setattr(StagedResults, "publish", spied)
    monkeypatch.setenv("JUDGELOOP_CACHE_MODE", "replay")
    for stage in ("assess", "judge", "refine"):
        run_stage("paper", stage)
    assert [p.name for p in published] == ["assessments.jsonl", "judgements.jsonl", "refinement.jsonl"]
    assert _outputs(project) == before  # the same bytes, and no staged or temporary file left


def test_a_stage_whose_item_fails_leaves_its_old_output_and_a_rerun_resumes(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _outputs(project)
    # Iteration 1 now re-judges the three metrics that passed: 3 new calls an item, for the model.
    rejudge_all(project)

    def failing(session: Any, transcript: Any, *args: Any, **kwargs: Any) -> Any:
        if transcript.item_id == sorted(TRANSCRIPTS)[-1]:
            raise RuntimeError("the last item broke")
        return original(session, transcript, *args, **kwargs)

    monkeypatch.setattr(paper_refine, "refine", failing)
    with pytest.raises(RuntimeError, match="the last item broke"):
        run_stage("paper", "refine")
    assert _outputs(project) == before  # nothing of the failed stage published, no stray file
    monkeypatch.setattr(paper_refine, "refine", original)
    capsys.readouterr()
    run_stage("paper", "refine")
    end = [line for line in capsys.readouterr().err.splitlines() if line.startswith("refine: done")]
    assert _outputs(project)["refinement.jsonl"] != before["refinement.jsonl"]
    assert [p for p in (project / "outputs").rglob(".*")] == []
    # The calls of the items that finished before the failure came from the cache: only the last's sent.
    assert end and re.search(r": 15 calls, 12 hits, 3 misses sent to the model", end[0]), end


def test_a_dry_run_that_met_a_model_call_stops_writing_results_no_one_will_adopt(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from pipeline.experiments.steps import jsonl_output

    step = SimpleNamespace(output=jsonl_output(Row), done=None)
    staged = StagedResults(step, tmp_path / "rows.jsonl")  # type: ignore[arg-type]
    model_call = threading.Event()

    def results() -> Iterator[Row]:
        yield Row(item="a", value=1)
        model_call.set()  # the dry run's next item asks the model: the stage runs for real
        yield Row(item="b", value=2)
        yield Row(item="c", value=3)

    kept = staged.write(results(), model_call)
    assert [row.item for row in kept] == ["a", "b", "c"]  # every result still seen (the prediction)
    assert staged.path.read_text(encoding="utf-8").count("\n") == 1  # only what came before the call
    staged.discard()
    assert not staged.path.exists()
