"""Fuzzing the reports' reading of the stages' recordings (pipeline.data.recorded_stages,
recorded_calls, recorded_models): a recording of any bytes, one-file or a sharded folder edited as
test_fuzz_shards edits it, read as a report reads it (StageRecords: every key's record, its model
and options, its place; the call counts, the model's label). The property of tests/fuzz/support.py,
and: every record a report is given verifies."""

from __future__ import annotations

import contextlib
import os
from functools import partial
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from pipeline.data.recorded_calls import stage_call_counts, stage_calls
from pipeline.data.recorded_models import design_model
from pipeline.data.recorded_stages import StageRecords
from pipeline.llm.recordings.stage_folders import CALLS_FILE
from pipeline.llm.records import CallRecord
from tests.fuzz.support import clear_or_correct, fuzz, inputs, laid_out, only_inside
from tests.fuzz.test_fuzz_records import CALL_LINE, RECORDING
from tests.fuzz.test_fuzz_shards import attacks
from tests.fuzz.test_fuzz_shards import seed as seed  # the fixture: a sharded recording's files


def _as_a_report_reads(root: Path) -> None:
    records = clear_or_correct(lambda: StageRecords.read(root, ["judge", "absent"]))
    if isinstance(records, StageRecords):
        for key in list(records):
            record = clear_or_correct(partial(records.__getitem__, key))
            assert not isinstance(record, CallRecord) or record.problem() is None, f"{key}: served unverified"
            clear_or_correct(partial(records.header, key))
        clear_or_correct(records.models)
    clear_or_correct(lambda: design_model(root, ["judge"]))
    clear_or_correct(lambda: stage_call_counts(root, ["judge"]))
    calls = clear_or_correct(lambda: stage_calls(root, ["judge"]))
    for call in calls.get("judge", []) if isinstance(calls, dict) else []:
        assert call.record.problem() is None


@fuzz
@given(data=inputs(RECORDING, CALL_LINE + b"\n"))
def test_a_recording_of_any_bytes_as_a_report_reads_it(sandbox: Path, data: bytes) -> None:
    root = laid_out(sandbox / "recordings", {f"judge/{CALLS_FILE}": data})
    _as_a_report_reads(root)
    only_inside(sandbox.parent, sandbox)


@fuzz
@given(data=st.data())
def test_a_sharded_recording_as_a_report_reads_it(
    sandbox: Path, seed: dict[str, bytes], data: st.DataObject
) -> None:
    root, outside = sandbox / "recordings", laid_out(sandbox / "outside", {})
    folder = laid_out(root / "judge", seed)
    for _, change, arguments in data.draw(attacks(seed)):
        if os.path.lexists(folder / CALLS_FILE):
            with contextlib.suppress(
                FileNotFoundError, IsADirectoryError, NotADirectoryError, FileExistsError
            ):
                change(folder, outside, *arguments)
    _as_a_report_reads(root)
    only_inside(sandbox.parent, sandbox)


def test_the_seeds_are_read_as_a_report_reads_them(sandbox: Path, seed: dict[str, bytes]) -> None:
    root = sandbox / "recordings"
    for data in (RECORDING, None):
        files = {CALLS_FILE: data} if data else seed
        laid_out(root, {f"judge/{name}": content for name, content in files.items()})
        records = StageRecords.read(root, ["judge"])
        assert len(records) > 1 and all(records[key].problem() is None for key in records)
        assert sum(stage_call_counts(root, ["judge"])["judge"].values()) >= len(records)
