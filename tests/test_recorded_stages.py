"""pipeline.data.recorded_stages: the report's calls held packed and parsed one at a time give what
the whole parse gave (stage_calls, first_by_key, call_counts, count_models), on the committed
recordings; a damaged line is still refused."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline.data.recorded_calls import call_counts, first_by_key, stage_calls
from pipeline.data.recorded_models import count_models
from pipeline.data.recorded_stages import StageRecords
from pipeline.errors import CorruptRecordError
from pipeline.llm.recordings import stage_folders
from pipeline.llm.recordings.verified_memo import VerifiedMemo
from tests.conftest import ROOT

STAGES = ("assess", "judge", "refine", "nothing_recorded")


def test_the_packed_calls_are_the_parsed_calls() -> None:
    parsed = stage_calls(ROOT / "recordings", STAGES)
    held = StageRecords.read(ROOT / "recordings", STAGES)
    assert held.counts == {stage: call_counts(calls) for stage, calls in parsed.items()}
    every = [call for stage in sorted(parsed) for call in parsed[stage]]
    assert held.models() == count_models(
        (c.record.model.backend, c.record.model.name, c.record.model.digest) for c in every
    )
    first = {key: call.record for key, call in first_by_key(every).items()}
    assert list(held) == list(first) and len(held) == len(first) > 0
    assert all(held[key] == record and key in held for key, record in first.items())
    assert "no such key" not in held and held.get("no such key") is None


def test_a_header_is_the_parsed_calls_model_and_options() -> None:
    """What the report's index reads of every call without unpacking its prompts."""
    held = StageRecords.read(ROOT / "recordings", STAGES)
    assert all(held.header(key) == (held[key].model, held[key].request.options) for key in held)
    assert held.header("no such key") is None
    # Where the report marks a call seen: one place a key, below its stage's line count.
    places = {key: held.place(key) for key in held}
    assert len(set(places.values())) == len(places) and held.place("no such key") is None
    assert all(place is not None and 0 <= place[1] < held.lines(place[0]) for place in places.values())


def test_a_header_of_a_line_changed_since_it_was_read_is_refused(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "recordings" / "judge", tmp_path / "judge")
    held = StageRecords.read(tmp_path, ["judge"], VerifiedMemo.beside(tmp_path / "cache"))
    calls = tmp_path / "judge" / stage_folders.CALLS_FILE
    text = calls.read_text(encoding="utf-8")
    damaged = text.replace('"temperature":0.0', '"temperature":0.5', 1)
    assert damaged != text and len(damaged) == len(text)
    calls.write_text(damaged, encoding="utf-8")
    with pytest.raises(CorruptRecordError):
        for key in held:
            held.header(key)


def test_a_damaged_recording_is_refused(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "recordings" / "judge", tmp_path / "judge")
    calls = tmp_path / "judge" / stage_folders.CALLS_FILE
    text = calls.read_text(encoding="utf-8")
    damaged = text.replace('"score', '"sc0re', 1)
    assert damaged != text
    calls.write_text(damaged, encoding="utf-8")
    memo = VerifiedMemo.beside(tmp_path / "cache")
    with pytest.raises(CorruptRecordError):
        StageRecords.read(tmp_path, ["judge"], memo)
