"""A replay that served every call from the stage's own recording as it was read leaves that file
in place, the same inode and bytes, instead of writing the same bytes again (issue 33, branch
replay-serve: pipeline.llm.recordings.unchanged). Any other case writes as before: a call added or
dropped, a line made anew, a file not laid out as the writer lays one out, a file changed since it
was read."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline.errors import CorruptRecordError
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.recordings import stage_calls, stage_folders, stage_writer
from pipeline.llm.recordings.stage_index import StageIndex, index_stage
from pipeline.llm.recordings.stage_writer import StageRecording
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import CallContext
from tests.helpers import request
from tests.test_recordings import _calls


def _file(directory: Path) -> Path:
    return directory / stage_folders.CALLS_FILE


def _stamp(path: Path) -> tuple[int, int, bytes]:
    info = path.stat()
    return info.st_ino, info.st_mtime_ns, path.read_bytes()


def _replayed(directory: Path, calls: list[RecordedCall], index: StageIndex | None = None) -> None:
    """`calls` added as a replay adds them (hits, the stage's recording as read), then written."""
    index = index if index is not None else index_stage(directory)
    recording = StageRecording()
    for call in reversed(calls):  # in another order than the file's
        recording.add(RecordedCall(context=call.context, record=call.record, cache_hit=True), recorded=index)
    recording.write(directory)


def _written(tmp_path: Path, calls: list[RecordedCall], name: str = "judge") -> Path:
    stage_writer.write_stage(tmp_path / name, calls)
    return tmp_path / name


def edited_in_place(path: Path) -> None:
    """One character of the last reply's text in the file changed, written in place (the same inode)."""
    data = bytearray(path.read_bytes())
    at = data.rindex(b'"text":"') + len(b'"text":"')
    data[at : at + 1] = b"X" if data[at : at + 1] != b"X" else b"Y"
    with path.open("r+b") as edit:
        edit.write(bytes(data))


def replayed_unless_refused(directory: Path, calls: list[RecordedCall], index: StageIndex) -> bool:
    """`calls` replayed (`_replayed`): True; False where the write refused a file changed on disk."""
    try:
        _replayed(directory, calls, index)
    except CorruptRecordError as exc:
        assert "changed on disk" in str(exc)
        return False
    return True


def with_a_raw_break(calls: list[RecordedCall], context: CallContext) -> list[RecordedCall]:
    """`calls` and one more call, in `context`, whose reply holds U+2028 as itself: valid JSON, the
    same record, but not the line the writer writes (line_safe escapes it)."""
    fake = FakeBackend()
    req = request("Rate this.")
    reply = fake.chat(req).model_copy(update={"text": "4\u2028a line break JSON leaves raw"})
    return [*calls, RecordedCall(context=context, record=CallRecord.new(fake.identity(), req, reply))]


def session_replayed(root: Path, calls: list[RecordedCall], serve: str) -> list[object]:
    """`calls` served by a session in replay mode, each asked with its request ("chat") or served by
    its key (as a stage adopting its dry run serves it), then closed: the calls its model was sent."""
    from tests.helpers import make_session

    session, backend = make_session(root, "replay")
    for call in calls:
        if serve == "chat":
            session.chat(call.record.request, call.context)
        else:
            session.serve(call.record.key, call.context)
    session.close()
    return list(backend.calls)


def test_a_replay_of_every_call_as_read_leaves_the_file_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _calls(9)
    directory = _written(tmp_path, calls)
    before = _stamp(_file(directory))
    os.utime(_file(directory), ns=(before[1] - 10**9, before[1] - 10**9))  # a write would move it
    before = _stamp(_file(directory))

    def packed_anew(*_: object) -> str:
        raise AssertionError("a recorded call packed into a new line")

    monkeypatch.setattr(stage_calls, "call_to_line", packed_anew)
    _replayed(directory, calls)
    assert _stamp(_file(directory)) == before
    assert sorted(p.name for p in directory.iterdir()) == [stage_folders.CALLS_FILE]


def test_the_file_left_is_the_file_a_write_gives(tmp_path: Path) -> None:
    calls = _calls(9)
    directory = _written(tmp_path, calls)
    _replayed(directory, calls)
    fresh = _written(tmp_path, calls, "fresh")
    assert _file(directory).read_bytes() == _file(fresh).read_bytes()


def _last(index: StageIndex, calls: list[RecordedCall]) -> int:
    """Which of `calls` the recording's last line holds (a call dropped or changed there leaves
    every other line in its place: only the count or the line itself tells)."""
    last = index.call_at(len(index.lines) - 1)
    held = (last.context, last.record.key)
    return next(i for i, c in enumerate(calls) if (c.context, c.record.key) == held)


def _short(n: int) -> list[RecordedCall]:
    """Calls whose prompts are too short for a block: a line made anew brings no block."""
    fake = FakeBackend()
    return [
        RecordedCall(
            context=CallContext(stage="judge", item=f"{900 + i}", labels={"metric": "coherence"}),
            record=CallRecord.new(fake.identity(), (req := request(f"Rate {i}.")), fake.chat(req)),
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("change", ["added", "dropped", "changed"])
@pytest.mark.parametrize("make", [_calls, _short])
def test_a_replay_that_adds_drops_or_changes_a_call_writes_the_file(
    tmp_path: Path, change: str, make: Callable[[int], list[RecordedCall]]
) -> None:
    calls = make(9)
    directory = _written(tmp_path, calls[:8] if change == "added" else calls)
    index = index_stage(directory)
    before = _stamp(_file(directory))
    served = list(calls)
    if change != "added":
        last = _last(index, calls)
        if change == "dropped":
            del served[last]
        else:  # the same request, another reply: its line made anew, not kept
            old = served[last].record
            reply = old.reply.model_copy(update={"text": old.reply.text + " (again)"})
            served[last] = RecordedCall(
                context=served[last].context, record=CallRecord.new(old.model, old.request, reply)
            )
    recording = StageRecording()
    for call in served:
        hit = RecordedCall(context=call.context, record=call.record, cache_hit=True)
        recording.add(hit, recorded=index)
    recording.write(directory)
    after = _stamp(_file(directory))
    assert after[0] != before[0]  # renamed into place: a new file
    assert after[2] == _file(_written(tmp_path, served, "fresh")).read_bytes() != before[2]


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def _calls_and_blocks(path: Path) -> tuple[list[bytes], list[bytes]]:
    lines = _lines(path)
    blocks = [line for line in lines if line.startswith(b'{"blob":')]
    return [line for line in lines if not line.startswith(b'{"blob":')], blocks


@pytest.mark.parametrize(
    "layout",
    [
        "calls reordered",
        "blocks reordered",
        "a block first",
        "no last newline",
        "a block unused",
        "a block spelled otherwise",
    ],
)
def test_a_file_laid_out_otherwise_is_written_as_the_writer_writes_it(tmp_path: Path, layout: str) -> None:
    calls = _calls(9)
    directory = _written(tmp_path, calls)
    canonical = _file(directory).read_bytes()
    call_lines, blocks = _calls_and_blocks(_file(directory))
    if layout == "calls reordered":
        call_lines = [call_lines[1], call_lines[0], *call_lines[2:]]
    elif layout == "blocks reordered":
        blocks = blocks[::-1]
    elif layout == "a block first":
        call_lines, blocks = [blocks[0], *call_lines], blocks[1:]
    elif layout == "a block spelled otherwise":  # the same text, a letter written as an escape
        at = blocks[0].index(b'"text":"') + len(b'"text":"')
        at += next(i for i, c in enumerate(blocks[0][at:]) if chr(c).isalpha())
        blocks[0] = blocks[0][:at] + b"\\u%04x" % blocks[0][at] + blocks[0][at + 1 :]
    elif layout == "a block unused":
        unused = _calls_and_blocks(_file(_written(tmp_path, _calls(12)[9:], "other")))[1]
        blocks = sorted({*blocks, *unused})
    data = b"".join(call_lines + blocks)
    _file(directory).write_bytes(data[:-1] if layout == "no last newline" else data)
    assert _file(directory).read_bytes() != canonical
    _replayed(directory, calls)
    assert _file(directory).read_bytes() == canonical


def test_a_line_holding_a_break_line_safe_escapes_is_written_escaped(tmp_path: Path) -> None:
    """A call line holding U+2028 as itself (valid JSON, the same record) is written as line_safe
    writes it, escaped: that line is not the one the writer would write, so the file is rewritten."""
    calls = with_a_raw_break(_calls(4), _calls(5)[4].context)
    directory = _written(tmp_path, calls)
    canonical = _file(directory).read_bytes()
    assert b"\\u2028" in canonical
    _file(directory).write_bytes(canonical.replace(b"\\u2028", "\u2028".encode()))
    _replayed(directory, calls)
    assert _file(directory).read_bytes() == canonical


def test_a_file_changed_since_it_was_read_is_not_left_as_it_is(tmp_path: Path) -> None:
    """A block's line edited in place after the recording was read and checked: the write either
    reads it back, finds it changed and refuses (the stage fails), or writes the blocks as verified
    (those it holds from the check) over it; never is the edited file left as the stage's."""
    calls = _calls(9)
    directory = _written(tmp_path, calls)
    canonical = _file(directory).read_bytes()
    index = index_stage(directory)
    edited_in_place(_file(directory))
    if replayed_unless_refused(directory, calls, index):
        assert _file(directory).read_bytes() == canonical


def test_a_file_renamed_over_since_it_was_read_is_written_again(tmp_path: Path) -> None:
    calls = _calls(9)
    directory = _written(tmp_path, calls)
    index = index_stage(directory)
    same = _file(directory).read_bytes()
    copy = directory / "copy.tmp"
    copy.write_bytes(same)
    copy.replace(_file(directory))  # the same bytes, another file than the one read
    inode = _file(directory).stat().st_ino
    _replayed(directory, calls, index)
    assert _file(directory).stat().st_ino != inode and _file(directory).read_bytes() == same


@pytest.mark.parametrize("serve", ["chat", "serve by key"])
def test_a_session_replaying_its_stage_leaves_the_recording_in_place(tmp_path: Path, serve: str) -> None:
    """End to end through a session in replay mode (each call asked with its request, or served by
    its key as a stage adopting its dry run serves it): the recording written at close is the file
    already there, left in place."""
    calls = _calls(6)
    (tmp_path / "recordings").mkdir()
    directory = _written(tmp_path / "recordings", calls)
    os.utime(_file(directory), ns=(10**18, 10**18))
    before = _stamp(_file(directory))
    assert session_replayed(tmp_path, calls, serve) == [] and _stamp(_file(directory)) == before
