"""bench/dvc_timeline.py's arithmetic (issue 31): a plain `dvc repro` cut into DVC's phases around
each stage's process, and each stage's slots as busy, idle with nothing sent (unfed) or idle with a
request waiting at the server."""

from __future__ import annotations

from typing import Any

import pytest

from bench.dvc_timeline import _unfed, busy_histogram, phases


def event(name: str, stage: str, start: float, end: float, cpu0: float, cpu1: float) -> dict[str, Any]:
    return {"name": name, "stage": stage, "start": start, "end": end, "cpu0": cpu0, "cpu1": cpu1}


def test_each_stage_is_cut_at_its_process_and_dvc_s_work_falls_before_or_after_it() -> None:
    events = [
        event("process", "", 0.0, 0.1, 0.0, 0.05),  # DVC's process: start to the launcher's first line
        event("imported", "", 0.1, 0.4, 0.05, 0.25),
        event("changed?", "a", 0.6, 0.62, 0.3, 0.31),
        event("run-cache look-up", "a", 0.62, 0.7, 0.31, 0.35),
        event("deps hashed", "a", 0.65, 0.69, 0.32, 0.34),  # inside the look-up: not its own row
        event("process", "a", 0.7, 3.0, 0.35, 0.36),
        event("outs hashed", "a", 3.0, 3.05, 0.36, 0.39),
        event("stage", "a", 0.6, 3.05, 0.3, 0.39),
        event("dvc.lock rewritten", "a", 3.05, 3.1, 0.39, 0.42),
        event("process", "b", 3.2, 4.0, 0.43, 0.44),
        event("stage", "b", 3.15, 4.0, 0.42, 0.44),
        event("exit", "", 4.3, 4.3, 0.5, 0.5),
    ]
    rows = {
        name: (round(wall, 3), round(cpu, 3))
        for name, wall, cpu in phases(events, {"a": {"user": 1.5, "sys": 0.5}})
    }
    assert rows["dvc: process start to its imports"] == (0.4, 0.25)
    assert rows["dvc: repo, index, stages collected"] == (0.2, 0.05)
    assert rows["a: dvc before"] == (0.1, 0.05)
    assert "a:   deps hashed" not in rows and rows["a:   run-cache look-up"] == (0.08, 0.04)
    assert rows["a: process"] == (2.3, 2.0)  # the stage's own CPU, from its trace line
    assert rows["a: dvc after"] == (0.15, 0.06)  # to DVC's start of the next stage, lock included
    assert rows["a:   dvc.lock rewritten"] == (0.05, 0.03)
    assert rows["b: process"] == (0.8, 0.0)  # no trace line: no CPU to give
    assert rows["b: dvc after"] == (0.3, 0.06)  # the last stage: to DVC's exit handlers


def test_busy_histogram_counts_the_seconds_at_each_number_of_slots_busy() -> None:
    spans = [[0.0, 2.0], [0.0, 1.0], [0.5, 1.5], [0.5, 3.0], [0.5, 3.0]]  # five at 0.5-1: four or more
    seconds = busy_histogram(spans, 0.0, 4.0, 4)
    # 0-0.5: two; 0.5-1.5: four or more; 1.5-2: three; 2-3: two; 3-4: none
    assert seconds == pytest.approx([1.0, 0.0, 1.5, 0.5, 1.0])
    assert sum(seconds) == pytest.approx(4.0)


def test_a_free_slot_is_unfed_when_nothing_waits_and_queued_when_a_request_does() -> None:
    spans = [[0.0, 1.0], [0.0, 2.0], [0.0, 2.0], [0.0, 2.0], [1.5, 2.0]]
    # A slot frees at 1.0; the fifth request arrived at 1.2 and started at 1.5.
    unfed, queued = _unfed(spans, [0.0, 0.0, 0.0, 0.0, 1.2], 0.0, 2.0, 4)
    assert unfed == pytest.approx(0.2)  # 1.0-1.2: nothing had been sent
    assert queued == pytest.approx(0.3)  # 1.2-1.5: sent, not yet started by the server
