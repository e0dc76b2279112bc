"""A stage adopting its dry run asks, for each of its calls, which record the session would serve
(stages.runner.served_alike) before serving any: the checksum of that record, read from the stage's
own recording line alone (StageIndex.checksum, LLMSession.served_checksum), its request not rebuilt
from its blocks (issue 33, branch replay-percall). The answer is the full lookup's, and the line is
read back against its digest as a served line is: an edit in place is refused, not answered."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline.errors import CorruptRecordError
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.cache.store import CallStore
from pipeline.llm.recordings import stage_folders, stage_writer
from pipeline.llm.recordings.index import RecordingIndex
from pipeline.llm.recordings.stage_index import StageIndex, index_stage
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.session import LLMSession
from pipeline.llm.settings import CacheMode
from pipeline.llm.types import CallContext, ChatReply
from pipeline.tools.status.probe import DryCall
from stages.runner import served_alike
from tests.test_recordings import _calls

FAKE = FakeBackend()


pytestmark = pytest.mark.usefixtures("fresh_memo")


def _stage(root: Path, n: int = 6) -> tuple[Path, list[RecordedCall]]:
    calls = _calls(n)
    directory = root / "recordings" / "judge"
    stage_writer.write_stage(directory, calls)
    return directory, calls


def _session(root: Path, mode: CacheMode = "replay") -> LLMSession:
    return LLMSession(
        stage="judge",
        mode=mode,
        store=CallStore(root / "cache"),
        index=RecordingIndex(root / "recordings"),
        recordings_dir=root / "recordings",
        identity=FAKE.identity,
        backend=lambda: FAKE,
    )


def test_each_calls_checksum_is_the_served_records_and_no_block_is_read(tmp_path: Path) -> None:
    directory, calls = _stage(tmp_path)
    index = index_stage(directory)
    index.blobs.clear_cache()
    checksums = {call.record.key: index.checksum(call.record.key) for call in calls}
    assert dict.__len__(index.blobs) == 0  # no request rebuilt from its blocks
    for call in calls:
        served = index.call(call.record.key)
        assert served is not None
        assert checksums[call.record.key] == served.record.checksum == call.record.checksum
    assert index.checksum("jl2:" + "0" * 32) is None  # not recorded here


def test_a_line_changed_on_disk_since_it_was_read_is_refused_not_answered(tmp_path: Path) -> None:
    directory, calls = _stage(tmp_path)
    index = index_stage(directory)
    key = calls[2].record.key
    found = index.at[key]
    path = index.lines.files.paths[index.lines.file[found]]
    offset = index.lines.offset[found] + index.lines.length[found] - 3
    fd = os.open(path, os.O_RDWR)
    try:  # one byte of the line's reply edited in place: the same file, the same length
        byte = os.pread(fd, 1, offset)
        os.pwrite(fd, b"x" if byte != b"x" else b"y", offset)
    finally:
        os.close(fd)
    with pytest.raises(CorruptRecordError, match="changed on disk"):
        index.checksum(key)
    with pytest.raises(CorruptRecordError, match="changed on disk"):
        index.call(key)


def test_a_place_naming_another_line_answers_nothing_and_call_refuses_it(tmp_path: Path) -> None:
    directory, calls = _stage(tmp_path)
    index = index_stage(directory)
    wanted, other = calls[3].record, calls[2].record
    at = dict(index.at)
    at[wanted.key] = at[other.key]
    misplaced = StageIndex(index.lines, index.blobs, at, index.models)
    assert misplaced.checksum(wanted.key) is None  # so served_alike asks the full lookup, which:
    with pytest.raises(CorruptRecordError, match="as the recording's index placed it"):
        misplaced.call(wanted.key)


@pytest.mark.parametrize("mode", ["replay", "auto"])
def test_the_session_answers_what_its_lookup_serves(tmp_path: Path, mode: CacheMode) -> None:
    _, calls = _stage(tmp_path)
    session = _session(tmp_path, mode)
    for call in calls:
        assert session.served_checksum(call.record.key) == call.record.checksum
    for call in calls:
        record = session.lookup(call.record.key)
        assert record is not None and record.checksum == session.served_checksum(call.record.key)
    assert session.served_checksum("jl2:" + "0" * 32) is None
    session.close(write_recording=False)


@pytest.mark.parametrize("mode", ["refresh", "off"])
def test_a_session_that_does_not_serve_its_recording_first_answers_nothing(
    tmp_path: Path, mode: CacheMode
) -> None:
    _, calls = _stage(tmp_path)
    session = _session(tmp_path, mode)
    assert all(session.served_checksum(call.record.key) is None for call in calls)
    session.close(write_recording=False)


def test_a_damaged_recording_raises_as_lookup_does(tmp_path: Path) -> None:
    directory, calls = _stage(tmp_path)
    path = directory / stage_folders.CALLS_FILE
    path.write_bytes(path.read_bytes().replace(b'"checksum":"', b'"checksum":"0', 1))
    session = _session(tmp_path)
    with pytest.raises(CorruptRecordError, match="cannot be used") as by_lookup:
        session.lookup(calls[0].record.key)
    with pytest.raises(CorruptRecordError, match="cannot be used") as by_checksum:
        session.served_checksum(calls[0].record.key)
    assert by_checksum.value.message == by_lookup.value.message
    session.close(write_recording=False)


class Session:
    """What served_alike asks of an LLMSession: a checksum where it can say, else the record."""

    def __init__(self, served: CallRecord, checksum: str | None) -> None:
        self.served, self.checksum, self.looked_up = served, checksum, 0

    def served_checksum(self, key: str) -> str | None:
        return self.checksum if key == self.served.key else None

    def lookup(self, key: str) -> CallRecord | None:
        self.looked_up += 1
        return self.served if key == self.served.key else None


def test_served_alike_looks_a_call_up_whole_only_where_the_checksum_cannot_say() -> None:
    request = _calls(1)[0].record.request
    first = CallRecord.new(FAKE.identity(), request, ChatReply(text="Score: 4"))
    other = CallRecord.new(FAKE.identity(), request, ChatReply(text="Score: 5"))  # same key
    dry = [DryCall.of(RecordedCall(CallContext(stage="judge", item="a"), first))]
    same = Session(first, first.checksum)
    assert served_alike(same, dry) and same.looked_up == 0  # type: ignore[arg-type]
    unknown = Session(first, None)
    assert served_alike(unknown, dry) and unknown.looked_up == 1  # type: ignore[arg-type]
    # Another checksum: the record is looked up, and its reply decides.
    changed = Session(other, "another")
    assert not served_alike(changed, dry) and changed.looked_up == 1  # type: ignore[arg-type]
