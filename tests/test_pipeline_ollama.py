"""The whole experiment against a protocol-faithful fake Ollama on real loopback HTTP."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

from pipeline.experiments.paper.params import PaperParams
from pipeline.llm.settings import in_flight
from pipeline.loops.results import Refinement
from pipeline.testing.fake_ollama import FakeOllama, Fault
from pipeline.testing.judge_responder import experiment_responder
from tests.conftest import ROOT, shared_dir
from tests.helpers import run_experiment


def _params(url: str, transcripts: Path, **llm: object) -> PaperParams:
    return PaperParams.model_validate(
        {
            "llm": {"backend": "ollama", "model": "test-model", "base_url": url, "max_retries": 3, **llm},
            "data": {"transcripts": str(transcripts)},
            "refine": {"max_iterations": 3},
        }
    )


def _refinements(root: Path) -> list[Refinement]:
    lines = (root / "outputs" / "refine.jsonl").read_text().splitlines()
    return [Refinement.model_validate_json(line) for line in lines]


def test_live_run_then_offline_replay_with_sockets_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    live = tmp_path / "live"
    with FakeOllama(responder=experiment_responder, parallel_slots=4) as server:
        server.inject(Fault.status(503), Fault.reset)  # transient faults on the way are retried
        params = _params(server.url, ROOT / "data" / "demo", parallelism=4)
        recorded = run_experiment(params, live)
        calls = server.requests_to("/api/chat")
        assert server.max_in_flight <= in_flight(4)
    refinements = _refinements(live)
    assert {r.stop_reason for r in refinements} >= {"passed"}  # the loop ran and converged somewhere
    assert calls > 6 * 4

    # A collaborator's clone: the recordings, no local cache, no server, no network at all.
    clone = tmp_path / "clone"
    shutil.copytree(live / "recordings", clone / "recordings")

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("replay opened a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    replay_params = params.model_copy(update={"cache": params.cache.model_copy(update={"mode": "replay"})})
    assert run_experiment(replay_params, clone) == recorded


def test_outputs_do_not_depend_on_parallelism(tmp_path: Path) -> None:
    with FakeOllama(responder=experiment_responder, parallel_slots=8) as server:
        one = run_experiment(_params(server.url, ROOT / "data" / "demo", parallelism=1), tmp_path / "one")
        eight = run_experiment(_params(server.url, ROOT / "data" / "demo", parallelism=8), tmp_path / "eight")
    # Two live runs: the recordings differ in when each call was made, the results must not.
    outputs = [name for name in one if name.startswith("outputs/")]
    assert outputs and all(one[name] == eight[name] for name in outputs)


def test_the_experiment_runs_over_the_annomi_transcripts(tmp_path: Path) -> None:
    corpus = shared_dir() / "corpora" / "annomi" / "daic_format_derived"
    if not corpus.is_dir():
        pytest.skip(f"AnnoMI corpus not found at {corpus} (../shared is absent; set JUDGELOOP_SHARED)")
    with FakeOllama(responder=experiment_responder, parallel_slots=8) as server:
        # AnnoMI sessions run long: a context big enough for the fake server not to truncate them.
        params = _params(server.url, corpus, parallelism=8, options={"num_ctx": 32768})
        run_experiment(params, tmp_path)
    refinements = _refinements(tmp_path)
    assert len(refinements) == len(list(corpus.glob("*_TRANSCRIPT.csv")))
    assert all(r.iterations[0].assessment.valid for r in refinements)
