"""`judgeloop repro`'s start (pipeline/tools/preflight.py, pipeline/tools/dvc_run.py,
pipeline/tools/warm_stages.py): DVC is asked which stages are out of date only when a server
refuses, and the warm process started before the pre-flight is the one DVC's stages use."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest

from pipeline.llm.settings import LLMSettings
from pipeline.tools import preflight, warm_stages

URL = "http://127.0.0.1:9/"


class _Design:
    def __init__(self, name: str, stages: list[str]) -> None:
        self.name = name
        self.stages = [type("S", (), {"name": stage})() for stage in stages]


@pytest.fixture
def one_remote(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """One design, `d`, with an LLM stage `s` asking URL; what was probed and asked, recorded."""
    seen: dict[str, Any] = {"probed": [], "status": 0, "stale": {"s"}, "refused": None}
    monkeypatch.setattr(preflight, "designs", lambda: [_Design("d", ["s"])])
    monkeypatch.setattr(preflight, "_remote", lambda name: LLMSettings(backend="ollama", base_url=URL))

    def refused(url: str, timeout: float) -> str | None:
        seen["probed"].append(url)
        why: str | None = seen["refused"]
        return why

    def stale(root: Path, targets: list[str]) -> set[str]:
        seen["status"] += 1
        stale_stages: set[str] = seen["stale"]
        return stale_stages

    monkeypatch.setattr(preflight, "refused", refused)
    monkeypatch.setattr(preflight, "stale_llm_stages", stale)
    yield seen


def test_every_server_answering_asks_dvc_nothing(one_remote: dict[str, Any]) -> None:
    preflight.check_servers(["s"])
    assert one_remote["probed"] == [URL] and one_remote["status"] == 0


def test_a_refusing_server_an_out_of_date_stage_needs_stops_the_run(one_remote: dict[str, Any]) -> None:
    one_remote["refused"] = "connection refused"
    with pytest.raises(click.ClickException, match=r"cannot connect to the ollama server at .*design d's"):
        preflight.check_servers(["s"])
    assert one_remote["status"] == 1


def test_a_refusing_server_no_stage_needs_does_not(one_remote: dict[str, Any]) -> None:
    one_remote["refused"], one_remote["stale"] = "connection refused", set()
    preflight.check_servers(["s"])
    assert one_remote["probed"] == [URL] and one_remote["status"] == 1


def test_warm_stages_inside_itself_starts_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    import dvc.stage.run as dvc_stage_run

    started: list[object] = []

    class Fake:
        def stop(self) -> None:
            started.append("stopped")

    def start() -> Fake:
        started.append("started")
        return Fake()

    monkeypatch.setattr(warm_stages.Zygote, "start", staticmethod(start))
    original = dvc_stage_run._run
    with warm_stages.warm_stages():
        replaced = dvc_stage_run._run
        with warm_stages.warm_stages():
            assert dvc_stage_run._run is replaced  # the outer one's, not replaced again
        assert started == ["started"] and dvc_stage_run._run is replaced
    assert started == ["started", "stopped"] and dvc_stage_run._run is original
    with warm_stages.warm_stages():  # and once left, a later `with` starts its own
        pass
    assert started == ["started", "stopped", "started", "stopped"]
