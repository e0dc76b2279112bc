"""Attack 5 of issue 28: a local-cache entry with a valid seal but another reply than the stage's
recording is never served, in auto mode as in replay; `judgeloop cache verify` names it and how to
drop it, and fails until it is dropped."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.experiments.params import load_params
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.cache.store import CallStore
from pipeline.llm.recordings import stage_reader
from pipeline.llm.records import CallRecord
from pipeline.llm.session import open_session
from pipeline.llm.types import CallContext, ChatReply
from pipeline.tools.cli import main
from tests.project import MODEL, recorded_project, scripted

CACHE = Path(".judgeloop/cache")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    recorded_project(tmp_path)
    return tmp_path


def plant_another_reply(root: Path, stage: str = "judge") -> CallRecord:
    """A local entry for one of the stage's recorded calls, with another reply, sealed and valid."""
    recorded = next(iter(stage_reader.read_stage(root / "recordings" / stage))).call.record
    forged = CallRecord.new(recorded.model, recorded.request, ChatReply(text="Score: 5 (planted)"))
    assert forged.key == recorded.key and forged.verify()
    store = CallStore(root / CACHE)
    store.put(forged)
    store.close()
    return recorded


def test_auto_mode_serves_the_recordings_reply_not_a_planted_local_one(project: Path) -> None:
    recorded = plant_another_reply(project)
    params = load_params()
    assert params.cache.mode == "auto"
    fake = FakeBackend(scripted, name=MODEL)
    with closing(open_session(params, "judge", root=project, backend_factory=lambda: fake)) as session:
        call = session.chat(recorded.request, recorded_context(project, recorded))
    assert call.record.reply.text == recorded.reply.text
    assert call.cache_hit and fake.calls == []


def recorded_context(root: Path, record: CallRecord) -> CallContext:
    return next(
        loaded.call.context
        for loaded in stage_reader.read_stage(root / "recordings" / "judge")
        if loaded.call.record.key == record.key
    )


def test_cache_verify_names_the_disagreeing_entry_and_repair_drops_it(project: Path) -> None:
    recorded = plant_another_reply(project)
    result = CliRunner().invoke(main, ["cache", "verify"])
    assert result.exit_code == 1, result.output
    assert f"{recorded.key}: holds another reply than " in result.output
    assert "recordings/judge/calls.jsonl:" in result.output
    assert "judgeloop cache verify --repair" in result.output
    repaired = CliRunner().invoke(main, ["cache", "verify", "--repair"])
    assert f"deleted local entry {recorded.key}" in repaired.output
    again = CliRunner().invoke(main, ["cache", "verify"])
    assert again.exit_code == 0, again.output
