"""Faults of the servers a record comes from: a 200 that carries no answer, and a model that changes
under a run. Neither may end up stored or recorded as a reply."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from tenacity import wait_none

from pipeline.errors import EmptyReplyError, ModelChangedError
from pipeline.llm.asking import EMPTY_REPLY_ATTEMPTS
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.backends.ollama import OllamaBackend
from pipeline.llm.recordings.stage_reader import read_stage
from pipeline.llm.runner import run_items
from pipeline.llm.types import CallContext
from pipeline.testing.fake_ollama import DEFAULT_MODELS, FakeOllama, Fault, default_responder
from pipeline.testing.fake_openai import FakeOpenAI
from tests.helpers import request
from tests.served import KINDS, assert_tried_and_kept_nowhere, backend_of, session, settings, stored

OLD = "sha256:" + DEFAULT_MODELS["test-model:latest"]
NEW = "sha256:" + "f" * 64


# -- a 200 without an answer -------------------------------------------------------------------------


def test_ollama_retries_a_200_without_a_message_or_its_content() -> None:
    with FakeOllama() as server:
        server.inject(Fault.empty_reply, Fault.no_content)
        reply = OllamaBackend(settings(server.url), wait=wait_none()).chat(request("hi"))
        assert reply.text.startswith("reply ") and server.requests_to("/api/chat") == 3


@pytest.mark.parametrize("said", ["", "  \n\t "])
@pytest.mark.parametrize("kind", KINDS)
def test_an_empty_or_blank_reply_is_a_failed_call_retried_counted_and_stored_nowhere(
    tmp_path: Path, kind: str, said: str
) -> None:
    """Over real loopback HTTP: the fake servers' responder writes the reply's text."""
    with FakeOllama(responder=lambda _: said) as ollama, FakeOpenAI(responder=lambda _: said) as openai:
        run = session(tmp_path, backend_of(kind, ollama, openai, max_retries=2))
        with pytest.raises(EmptyReplyError, match=r"an empty reply.*gave up after 3 attempts"):
            run.chat(request("judge this"), CallContext(stage="judge", item="1"))
        assert_tried_and_kept_nowhere(run, tmp_path, kind, ollama, openai, attempts=3)


def test_an_in_process_backend_s_empty_reply_is_asked_again_then_fails_and_is_never_stored(
    tmp_path: Path,
) -> None:
    """The embedded model (and any backend that returns a blank reply rather than raising): the
    session asks again a bounded number of times, counts each, and stores none."""
    answers = iter(["", " \n", "a score: 3"])
    sampling = FakeBackend(responder=lambda _: next(answers))
    run = session(tmp_path, sampling)
    call = run.chat(request("judge this"), CallContext(stage="judge", item="1"))
    assert call.record.reply.text == "a score: 3" and run.stats.empty_replies == 2
    run.close(write_recording=True)
    assert stored(tmp_path) == ["judge this"]

    greedy = FakeBackend(responder=lambda _: "\u3000")
    run = session(tmp_path / "greedy", greedy)
    with pytest.raises(EmptyReplyError, match=f"empty .* {EMPTY_REPLY_ATTEMPTS} times"):
        run.chat(request("judge this"), CallContext(stage="judge", item="1"))
    assert len(greedy.calls) == EMPTY_REPLY_ATTEMPTS == run.stats.empty_replies
    run.close(write_recording=True)
    assert stored(tmp_path / "greedy") == []
    assert list(read_stage(tmp_path / "greedy" / "recordings" / "judge")) == []


@pytest.mark.parametrize("kind", KINDS)
def test_empty_200s_are_never_stored_nor_recorded(tmp_path: Path, kind: str) -> None:
    hollow: list[Any] = [{}, {"choices": [{"index": 0, "message": {"role": "assistant"}}]}, {"choices": []}]
    with FakeOllama() as ollama, FakeOpenAI() as openai:
        backend = backend_of(kind, ollama, openai, max_retries=2)
        backend.identity()  # the faults are for the chat requests
        if kind == "openai":
            openai.send_next(*hollow)
        elif kind == "ollama /v1":
            ollama.inject(Fault.empty_reply, Fault.no_content, Fault.no_content)
        else:
            ollama.inject(Fault.empty_reply, Fault.no_content, Fault.empty_reply)
        run = session(tmp_path, backend)
        with pytest.raises(
            EmptyReplyError, match=r"a 200 reply without a message's content.*gave up after 3"
        ):
            run.chat(request("judge this"), CallContext(stage="judge", item="1"))
        assert run.calls == []
        run.close(write_recording=True)
        assert stored(tmp_path) == []
        assert list(read_stage(tmp_path / "recordings" / "judge")) == []
        # The server answers again: the call is made, not served from a cached empty reply.
        again = session(tmp_path, backend_of(kind, ollama, openai, max_retries=2))
        assert again.chat(request("judge this"), CallContext(stage="judge", item="1")).record.reply.text
        assert not again.calls[0].cache_hit
        again.close()


# -- a model that changes under the run --------------------------------------------------------------


def judged(root: Path, backend: OllamaBackend, items: int) -> None:
    run = session(root, backend)
    try:
        run_items(
            run,
            list(range(items)),
            lambda i: run.chat(request(f"item {i}"), CallContext(stage="judge", item=str(i))),
            "judge",
        )
    finally:
        run.close(write_recording=False)


def test_a_digest_that_changes_mid_run_stops_the_stage_and_nothing_after_it_is_stored(tmp_path: Path) -> None:
    with FakeOllama() as server:
        chats = itertools.count(1)

        def pulled_again_during_the_fifth(body: dict[str, Any]) -> str:
            if next(chats) == 5:
                server.repull("test-model", NEW)
            return default_responder(body)

        server.responder = pulled_again_during_the_fifth
        backend = OllamaBackend(settings(server.url), wait=wait_none())
        with pytest.raises(ModelChangedError) as stopped:
            judged(tmp_path, backend, items=12)
        message = stopped.value.message
        assert f"its digest was {OLD} when the run started and is {NEW} now" in message
        assert f"pin llm.digest: {OLD}" in message and "run the stage again" in message
        # No reply is stored before a check begun after it confirms the digest: the 5th reply, made
        # while the weights changed, is not stored, nor any later one. No 6th call is sent.
        assert server.requests_to("/api/chat") == 5
        assert stored(tmp_path) == [f"item {i}" for i in range(4)]
        paths = [r.path for r in server.received]
        assert paths[-1] == "/api/tags" and paths.count("/api/tags") == 6  # identity, after each call


def test_the_digest_is_checked_again_after_a_connection_error(tmp_path: Path) -> None:
    with FakeOllama() as server:
        chats = itertools.count(1)

        def pulled_again_during_the_first(body: dict[str, Any]) -> str:
            if next(chats) == 1:
                server.repull("test-model", NEW)
                server.inject(Fault.reset)  # the server restarts with the new weights: a reset
            return default_responder(body)

        server.responder = pulled_again_during_the_first
        backend = OllamaBackend(settings(server.url), wait=wait_none())
        with pytest.raises(ModelChangedError):
            judged(tmp_path, backend, items=5)
        assert stored(tmp_path) == []  # the first reply came while the weights changed
