"""A recording verified once is not verified again while its content is the same (issue 31), and
nothing else can pass for verified: other content, a memo entry written without this user's key,
a memo copied from another user."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.errors import CorruptRecordError
from pipeline.llm.recordings import stage_folders, stage_reader, stage_writer
from pipeline.llm.recordings.verified_memo import VerifiedMemo, digest, forget_in_process
from pipeline.llm.records import CallRecord
from tests.test_recordings import _calls


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[list[str]]:
    """Each record verified (CallRecord.problem), by key; a memo key of the test's own."""
    monkeypatch.setenv("JUDGELOOP_MEMO_KEY", str(tmp_path / "memo.key"))
    from pipeline.llm.recordings import verified_memo

    verified_memo._key.cache_clear()
    forget_in_process()
    seen: list[str] = []
    problem = CallRecord.problem

    def counting(self: CallRecord) -> str | None:
        seen.append(self.key)
        return problem(self)

    monkeypatch.setattr(CallRecord, "problem", counting)
    yield seen
    verified_memo._key.cache_clear()
    forget_in_process()


def read(directory: Path, memo: VerifiedMemo) -> list[str]:
    return [loaded.call.record.reply.text for loaded in stage_reader.read_stage(directory, memo=memo)]


def test_a_recording_verified_once_is_parsed_but_not_verified_again(
    counted: list[str], tmp_path: Path
) -> None:
    stage_writer.write_stage(tmp_path / "judge", _calls(3))
    memo = VerifiedMemo(tmp_path / "verified")
    first = read(tmp_path / "judge", memo)
    assert len(counted) == 3
    forget_in_process()  # a later process: only the folder remembers
    assert read(tmp_path / "judge", VerifiedMemo(tmp_path / "verified")) == first
    assert len(counted) == 3
    # Its entry is an HMAC under this user's key, not the content's digest itself.
    parts = stage_reader.split_recording(tmp_path / "judge")
    assert [p.name for p in (tmp_path / "verified").iterdir()] != [digest(parts)]


def test_an_edited_recording_is_verified_in_full_and_refused(counted: list[str], tmp_path: Path) -> None:
    stage_writer.write_stage(tmp_path / "judge", _calls(2))
    read(tmp_path / "judge", VerifiedMemo(tmp_path / "verified"))
    path = tmp_path / "judge" / stage_folders.CALLS_FILE
    lines = path.read_text().splitlines()
    row = json.loads(lines[0])
    row["reply"]["text"] = "Score: 5"
    lines[0] = json.dumps(row)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(CorruptRecordError, match="checksum"):
        read(tmp_path / "judge", VerifiedMemo(tmp_path / "verified"))


def test_a_forged_or_foreign_memo_vouches_for_nothing(
    counted: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stage_writer.write_stage(tmp_path / "judge", _calls(2))
    path = tmp_path / "judge" / stage_folders.CALLS_FILE
    lines = path.read_text().splitlines()
    row = json.loads(lines[0])
    row["reply"]["text"] = "Score: 5"
    lines[0] = json.dumps(row)
    path.write_text("\n".join(lines) + "\n")
    # Someone without the key names an entry after the edited content's digest.
    forged = tmp_path / "verified"
    forged.mkdir()
    (forged / digest(stage_reader.split_recording(tmp_path / "judge"))).touch()
    with pytest.raises(CorruptRecordError, match="checksum"):
        read(tmp_path / "judge", VerifiedMemo(forged))
    # A memo another user's judgeloop wrote (another key) is not this user's either.
    stage_writer.write_stage(tmp_path / "rag", _calls(2))
    read(tmp_path / "rag", VerifiedMemo(tmp_path / "theirs"))
    shutil.copytree(tmp_path / "theirs", tmp_path / "mine")
    from pipeline.llm.recordings import verified_memo

    monkeypatch.setenv("JUDGELOOP_MEMO_KEY", str(tmp_path / "another.key"))
    verified_memo._key.cache_clear()
    forget_in_process()
    before = len(counted)
    read(tmp_path / "rag", VerifiedMemo(tmp_path / "mine"))
    assert len(counted) == before + 2  # verified in full again


@pytest.mark.parametrize("loose", [True, False], ids=["others may read it", "its owner's alone"])
def test_a_memo_key_others_may_read_is_said_once_with_its_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, loose: bool
) -> None:
    """A key file others may read is no key (review13): the on-disk memo is off, which costs time
    only, and the user is told once, the file and `chmod 600` named, its name escaped (mend-close)."""
    from pipeline.llm.recordings import verified_memo

    key = tmp_path / "memo\x1b[2J.key"  # a name that would act on the terminal, printed raw
    key.write_bytes(b"k" * 32)
    key.chmod(0o644 if loose else 0o600)
    monkeypatch.setenv(verified_memo.KEY_ENV, str(key))
    verified_memo._key.cache_clear()
    try:
        with caplog.at_level("WARNING", logger=verified_memo.__name__):
            sealed = [verified_memo.seal(b"a"), verified_memo.seal(b"b")]
    finally:
        verified_memo._key.cache_clear()
    said = [record.getMessage() for record in caplog.records if record.name == verified_memo.__name__]
    if not loose:
        assert None not in sealed and said == []
        return
    assert sealed == [None, None]
    assert len(said) == 1, said
    assert "\x1b" not in said[0] and "memo\\x1b[2J.key" in said[0]
    assert "(mode 644)" in said[0] and "Fix: chmod 600 " in said[0]
