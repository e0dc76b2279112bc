"""A pool of servers (llm.servers) on real loopback HTTP: same weights or no run, least-loaded
dispatch, failover, the digest re-checked per server, and keys that do not depend on the pool."""

from __future__ import annotations

import hashlib
import socket
from pathlib import Path

import pytest

from pipeline.errors import (
    BackendError,
    BadRequestError,
    ConfigError,
    ModelChangedError,
    TransientBackendError,
)
from pipeline.experiments.paper.params import PaperParams
from pipeline.llm.backends import make_backend
from pipeline.llm.backends.ollama import OllamaBackend
from pipeline.llm.backends.pool import Member, ServerPool
from pipeline.llm.settings import LLMSettings, in_flight, load_settings
from pipeline.llm.types import ChatRequest, Message
from pipeline.testing.fake_ollama import FakeOllama, Fault
from pipeline.testing.fake_openai import FakeOpenAI
from pipeline.testing.judge_responder import experiment_responder
from tests.conftest import ROOT
from tests.helpers import run_experiment

OTHER_WEIGHTS = {"test-model:latest": hashlib.sha256(b"other weights").hexdigest()}


def _params(llm: dict[str, object]) -> PaperParams:
    return PaperParams.model_validate(
        {
            "llm": {"backend": "ollama", "model": "test-model", "max_retries": 1, **llm},
            "data": {"transcripts": str(ROOT / "data" / "demo")},
            "refine": {"max_iterations": 3},
        }
    )


def _outputs(recorded: dict[str, bytes]) -> dict[str, bytes]:
    return {name: data for name, data in recorded.items() if name.startswith("outputs/")}


def _ask(i: int) -> ChatRequest:
    return ChatRequest(messages=(Message(role="user", content=f"question {i}"),))


def test_outputs_are_byte_identical_with_one_server_or_three_of_different_speeds(tmp_path: Path) -> None:
    with FakeOllama(responder=experiment_responder, parallel_slots=4) as lone:
        one = run_experiment(_params({"base_url": lone.url, "parallelism": 4}), tmp_path / "one")
    with (
        FakeOllama(responder=experiment_responder, parallel_slots=4, latency_s=0.0) as fast,
        FakeOllama(responder=experiment_responder, parallel_slots=4, latency_s=0.01) as slow,
        FakeOllama(responder=experiment_responder, parallel_slots=2, latency_s=0.03) as slowest,
    ):
        servers = [
            {"base_url": fast.url, "parallelism": 4},
            {"base_url": slow.url, "parallelism": 4},
            {"base_url": slowest.url, "parallelism": 2},
        ]
        three = run_experiment(_params({"servers": servers}), tmp_path / "three")
        answered = [s.requests_to("/api/chat") for s in (fast, slow, slowest)]
        for server, slots in ((fast, 4), (slow, 4), (slowest, 2)):
            assert server.max_in_flight <= in_flight(slots)
    assert _outputs(one) and _outputs(one) == _outputs(three)
    assert all(n > 0 for n in answered), answered  # every server took calls
    # The same keys: the three servers' recordings answer a lone server's replay.
    assert sorted(name for name in one if name.startswith("recordings/")) == sorted(
        name for name in three if name.startswith("recordings/")
    )


def test_a_pool_whose_servers_serve_other_weights_is_refused_naming_each(tmp_path: Path) -> None:
    with FakeOllama() as a, FakeOllama(models=OTHER_WEIGHTS) as b:
        settings = LLMSettings(
            backend="ollama",
            model="test-model",
            servers=[{"base_url": a.url, "parallelism": 2}, {"base_url": b.url, "parallelism": 2}],
        )
        pool = make_backend(settings, tmp_path)
        with pytest.raises(ConfigError, match="do not all serve the same weights") as refused:
            pool.chat(_ask(0))
        pool.close()
        assert a.url in refused.value.message and b.url in refused.value.message
        assert a.requests_to("/api/chat") == b.requests_to("/api/chat") == 0  # nothing was asked


def test_openai_servers_must_serve_the_same_model_and_checkpoint(tmp_path: Path) -> None:
    with FakeOpenAI() as a, FakeOpenAI(models=("other-model", "test-model")) as b:
        same = LLMSettings(
            backend="openai",
            model="test-model",
            servers=[{"base_url": a.url}, {"base_url": b.url}],
        )
        pool = make_backend(same, tmp_path)
        assert pool.identity().digest == "name:test-model"
        assert pool.chat(_ask(1)).text
        pool.close()
    with FakeOpenAI() as a, FakeOpenAI(models=("test-model-v2",)) as b:
        differ = LLMSettings(
            backend="openai",
            model="test-model",
            servers=[{"base_url": a.url}, {"base_url": b.url}],
        )
        pool = make_backend(differ, tmp_path)
        with pytest.raises(Exception, match=b.url):  # b does not serve the model: named, refused
            pool.identity()
        pool.close()


def test_calls_of_a_failing_server_move_to_the_others(tmp_path: Path) -> None:
    with FakeOllama(parallel_slots=2) as good, FakeOllama(parallel_slots=2) as bad:
        settings = LLMSettings(
            backend="ollama",
            model="test-model",
            max_retries=0,
            servers=[{"base_url": bad.url, "parallelism": 2}, {"base_url": good.url, "parallelism": 2}],
        )
        pool = make_backend(settings, tmp_path)
        assert isinstance(pool, ServerPool)
        pool.identity()
        bad.inject(*[Fault.status(503)] * 50)  # the bad server answers nothing but "busy"
        replies = [pool.chat(_ask(i)).text for i in range(6)]
        pool.close()
    with FakeOllama() as lone:
        alone = make_backend(LLMSettings(backend="ollama", model="test-model", base_url=lone.url), tmp_path)
        assert replies == [alone.chat(_ask(i)).text for i in range(6)]
        alone.close()
    assert good.requests_to("/api/chat") == 6
    assert bad.requests_to("/api/chat") == 1  # failed once, then set aside


def test_a_request_the_server_rejects_is_not_sent_to_the_others(tmp_path: Path) -> None:
    with FakeOllama() as a, FakeOllama() as b:
        settings = LLMSettings(
            backend="ollama", model="test-model", servers=[{"base_url": a.url}, {"base_url": b.url}]
        )
        pool = make_backend(settings, tmp_path)
        pool.identity()
        a.inject(Fault.status(400))
        b.inject(Fault.status(400))
        with pytest.raises(BadRequestError):
            pool.chat(_ask(0))
        pool.close()
        assert a.requests_to("/api/chat") + b.requests_to("/api/chat") == 1


def test_when_every_server_fails_the_call_fails_with_the_last_error(tmp_path: Path) -> None:
    with FakeOllama() as a, FakeOllama() as b:
        settings = LLMSettings(
            backend="ollama",
            model="test-model",
            max_retries=0,
            servers=[{"base_url": a.url}, {"base_url": b.url}],
        )
        pool = make_backend(settings, tmp_path)
        pool.identity()
        a.inject(Fault.status(503))
        b.inject(Fault.status(503))
        with pytest.raises(TransientBackendError, match=r"every server of llm\.servers failed"):
            pool.chat(_ask(0))
        pool.close()


def test_the_digest_is_rechecked_per_server_and_a_changed_server_is_retired() -> None:
    with FakeOllama() as steady, FakeOllama() as repulled:
        members = [
            Member(
                server.url,
                1,
                OllamaBackend(LLMSettings(backend="ollama", model="test-model", base_url=server.url)),
            )
            for server in (repulled, steady)
        ]
        pool = ServerPool("ollama", members)
        started = pool.identity()
        pool.chat(_ask(0))  # the repulled server is the least loaded first: it answers this one
        assert repulled.requests_to("/api/chat") == 1
        repulled.repull("test-model", "sha256:" + "9" * 64)
        for i in range(1, 5):
            pool.chat(_ask(i))  # its next reply is refused; that call and the rest go to the other
        assert repulled.requests_to("/api/chat") == 2 and steady.requests_to("/api/chat") == 4
        assert members[0].retired is not None and "changed during the run" in members[0].retired
        assert pool.identity() == started
        steady.repull("test-model", "sha256:" + "8" * 64)
        with pytest.raises(ModelChangedError):
            pool.chat(_ask(9))  # no server is left with the weights the run started with
        pool.close()


def test_the_pool_comes_from_params_or_the_environment(tmp_path: Path) -> None:
    params = tmp_path / "params.yaml"
    params.write_text("llm:\n  backend: ollama\n  servers:\n    - {base_url: 'http://a:1', parallelism: 4}\n")
    assert [s.base_url for s in load_settings(PaperParams, params).llm.servers] == ["http://a:1"]
    environ = {"JUDGELOOP_SERVERS": "http://a:1=4, http://b:2=4,http://c:3=2"}
    servers = load_settings(PaperParams, params, environ=environ).llm.servers
    assert [(s.base_url, s.parallelism) for s in servers] == [
        ("http://a:1", 4),
        ("http://b:2", 4),
        ("http://c:3", 2),
    ]
    with pytest.raises(ConfigError, match="embedded backend runs in this process"):
        make_backend(LLMSettings(backend="embedded", servers=[{"base_url": "http://a:1"}]), tmp_path)


def test_a_pool_member_that_is_down_is_named_with_one_fix_for_the_pool(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
    with FakeOllama() as alive:
        settings = LLMSettings(
            backend="ollama",
            model="test-model",
            max_retries=1,
            servers=[{"base_url": alive.url, "parallelism": 2}, {"base_url": dead, "parallelism": 2}],
        )
        pool = make_backend(settings, tmp_path)
        with pytest.raises(BackendError) as down:
            pool.chat(_ask(0))
        pool.close()
    message = down.value.message
    assert dead in message and "remove it from llm.servers" in message
    # The lone server's advice (llm.base_url) does not fit a pool, and one Fix reads as one.
    assert message.count("Fix:") == 1 and "llm.base_url" not in message and ".." not in message
