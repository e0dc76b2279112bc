"""Fuzzing the recordings folder as a replaying session reads it (pipeline.llm.recordings.index:
RecordingIndex with the pins of dvc.lock), where test_fuzz_diff fuzzes `judgeloop diff`'s reader:
the same attacks (edited recordings, odd and look-alike names, links out, a file where a folder
was, very long lines), and one more: a forger's recording of a stage's calls with other replies
(each record sealed again, so it verifies) in a folder no stage owns, named like a stage or
sorting before one (`JUDGE`, `Judge`, `aaa`). The property: a lookup of any recorded call, from
any stage, gives the committed record (the same checksum), no record, or a clear error; never
another recording's reply for a pinned stage's call."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st

from pipeline.llm.recordings.index import RecordingIndex
from pipeline.llm.recordings.pins import Pins
from pipeline.llm.recordings.stage_folders import CALLS_FILE
from pipeline.llm.recordings.stage_reader import read_stage
from pipeline.llm.recordings.stage_writer import write_stage
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import ChatReply
from tests.fuzz.support import ROOT, clear_or_correct, fuzz
from tests.fuzz.test_fuzz_diff import STAGES, attack
from tests.fuzz.test_fuzz_diff import attacks as diff_attacks

# The smaller recordings only (each example reads them all again): test_fuzz_diff's attacks on the
# others' folders leave them absent, and absent is what a pin allows.
SMALL = ["assess", "judge", "regen_generate", "select_pick"]
COMMITTED = {stage: [loaded.call for loaded in read_stage(ROOT / "recordings" / stage)] for stage in SMALL}
CHECKSUMS = {call.record.key: call.record.checksum for calls in COMMITTED.values() for call in calls}
FORGER_NAMES = ["JUDGE", "Judge", "REFINE", "aaa", "judge_", "judge.", "0"]


def forged(calls: list[RecordedCall]) -> list[RecordedCall]:
    """The calls with other replies, each record made again (so it verifies, under the same key)."""
    return [
        RecordedCall(
            context=call.context,
            record=CallRecord.new(call.record.model, call.record.request, ChatReply(text="forged")),
        )
        for call in calls
    ]


@pytest.fixture(scope="module")
def project(sandbox: Path) -> Iterator[tuple[Path, Path]]:
    """The committed pipeline (dvc.yaml, dvc.lock, params.yaml) with its recordings, and a folder
    outside it for the links to point at."""
    for name in ("dvc.yaml", "dvc.lock", "params.yaml"):
        shutil.copy(ROOT / name, sandbox / name)
    outside = sandbox.parent / "outside"  # beside the project, as test_fuzz_diff's links expect
    (outside / "judge").mkdir(parents=True)
    shutil.copy(ROOT / "recordings" / "judge" / CALLS_FILE, outside / "judge" / CALLS_FILE)
    shutil.copy(ROOT / "recordings" / "judge" / CALLS_FILE, outside / CALLS_FILE)
    yield sandbox, outside
    shutil.rmtree(outside)


def _reset(root: Path) -> Path:
    recordings = root / "recordings"
    if recordings.is_symlink():
        recordings.unlink()
    elif recordings.exists():
        shutil.rmtree(recordings)
    for stage in SMALL:
        shutil.copytree(ROOT / "recordings" / stage, recordings / stage)
    return recordings


def _served_as_committed(found: Any, key: str) -> None:
    if isinstance(found, CallRecord):
        assert found.checksum == CHECKSUMS[key], f"{key}: served a reply the pinned stage did not record"


@fuzz
@given(
    chosen=diff_attacks,
    forger=st.lists(st.tuples(st.sampled_from(FORGER_NAMES), st.sampled_from(SMALL)), max_size=2),
    asked=st.lists(
        st.tuples(st.sampled_from(sorted(CHECKSUMS)), st.sampled_from(STAGES)), min_size=1, max_size=8
    ),
)
@example(  # found: a pinned stage's folder linked out read as unpinned (its link resolves elsewhere)
    chosen=[("link out", ("assess", "stage"))],
    forger=[("JUDGE", "assess")],
    asked=[(COMMITTED["assess"][0].record.key, "assess")],
)
def test_a_session_s_lookups_in_a_hostile_recordings_folder(
    project: tuple[Path, Path],
    chosen: list[tuple[str, Any]],
    forger: list[tuple[str, str]],
    asked: list[tuple[str, str]],
) -> None:
    root, outside = project
    recordings = _reset(root)
    attack(recordings, outside, chosen)
    for name, stage in forger:
        event(f"forged {name}")
        if recordings.is_dir() and not recordings.is_symlink() and not (recordings / name).exists():
            write_stage(recordings / name, forged(COMMITTED[stage]))
    index = RecordingIndex(recordings, Pins(root, recordings))
    for key, stage in asked:
        _served_as_committed(clear_or_correct(partial(index.lookup, key, stage)), key)
    merged = clear_or_correct(lambda: index.by_key)
    if isinstance(merged, dict):
        for key, record in merged.items():
            if key in CHECKSUMS:
                _served_as_committed(record, key)


@pytest.mark.parametrize("name", ["JUDGE", "Judge", "aaa"])
def test_a_forged_recording_beside_the_pipeline_s_does_not_answer_for_a_pinned_stage(
    project: tuple[Path, Path], name: str
) -> None:
    """Found here: a session looks a call up in its own stage's recording, then in every other
    folder under recordings/ by name; a folder no stage owns is pinned by nothing, and `JUDGE`
    (or `aaa`) sorts before `judge`, so its forged reply was served for judge's call to a later
    stage (refine's lookup, `by_key`). The pinned stages are now looked in first."""
    root, _ = project
    recordings = _reset(root)
    write_stage(recordings / name, forged(COMMITTED["judge"]))
    index = RecordingIndex(recordings, Pins(root, recordings))
    for call in COMMITTED["judge"]:
        served = index.lookup(call.record.key, "refine")
        assert served is not None and served.checksum == call.record.checksum
    assert {key: index.by_key[key].checksum for key in CHECKSUMS} == CHECKSUMS
    held = RecordingIndex(recordings, Pins(root, recordings), hold_one=True)  # `judgeloop status`
    served = held.lookup(COMMITTED["judge"][0].record.key, "refine")
    assert served is not None and served.checksum == COMMITTED["judge"][0].record.checksum


def test_while_a_pinned_recording_is_damaged_no_unpinned_folder_answers(project: tuple[Path, Path]) -> None:
    """Found by the fuzzing once pinned stages came first: judge's recording edited (so refused
    by its pin) left its calls to the next folder holding their keys, a forged `0`."""
    root, _ = project
    recordings = _reset(root)
    write_stage(recordings / "0", forged(COMMITTED["judge"]))
    calls = recordings / "judge" / CALLS_FILE
    calls.write_bytes(calls.read_bytes().replace(b"Tiredness", b"Tiredness.", 1))
    for hold_one in (False, True):
        index = RecordingIndex(recordings, Pins(root, recordings), hold_one=hold_one)
        assert index.lookup(COMMITTED["judge"][0].record.key, "refine") is None
        assert index.lookup(COMMITTED["assess"][0].record.key, "refine") is not None  # pinned: answers
    assert not set(RecordingIndex(recordings, Pins(root, recordings)).by_key) & {
        call.record.key for call in COMMITTED["judge"]
    }
