"""Attack 1 of issue 28: a prompt or reply holding a character that str.splitlines takes for a line
break (U+2028, U+2029, U+0085, and the controls \\x0b \\x0c \\x1c-\\x1e \\r) round-trips through a
stage's recording: written, read back, replayed, and added to by a later run."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.recordings import line_format, stage_folders, stage_reader, stage_writer
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import CallContext, ChatReply
from tests.helpers import request

# Every character str.splitlines breaks a line at.
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
ODD_BREAKS = "\x85\u2028\u2029"  # the ones JSON does not escape


def call_with(prompt: str, reply: str, item: str = "901") -> RecordedCall:
    fake = FakeBackend()
    req = request(prompt)
    record = CallRecord.new(fake.identity(), req, ChatReply(text=reply))
    return RecordedCall(context=CallContext(stage="judge", item=item), record=record)


def round_trip(directory: Path, calls: list[RecordedCall]) -> list[RecordedCall]:
    stage_writer.write_stage(directory, calls)
    return [loaded.call for loaded in stage_reader.read_stage(directory)]


def test_every_line_break_character_round_trips(tmp_path: Path) -> None:
    calls = [
        call_with(f"a prompt {c!r} here:{c}and on", f"a reply{c}with a break {c!r}", item=f"{900 + i}")
        for i, c in enumerate(LINE_BREAKS)
    ]
    back = round_trip(tmp_path / "judge", calls)
    assert sorted((c.context.item, c.record) for c in back) == sorted(
        (c.context.item, c.record) for c in calls
    )


def test_a_long_prompt_with_separators_in_its_shared_blocks_round_trips(tmp_path: Path) -> None:
    transcript = "".join(f"Participant: line {i} ends{ODD_BREAKS[i % 3]}" for i in range(400))
    calls = [
        call_with(f"Judge {i}.\n{transcript}", f"Score: {i}\u2028done", item=f"{900 + i}") for i in range(3)
    ]
    assert [c.record for c in round_trip(tmp_path / "judge", calls)] == [c.record for c in calls]


def test_the_file_holds_no_raw_separator_and_later_runs_add_to_it(tmp_path: Path) -> None:
    directory = tmp_path / "judge"
    first = call_with("one\u2028two", "three\u2029four\x85five", item="901")
    stage_writer.write_stage(directory, [first])
    data = (directory / stage_folders.CALLS_FILE).read_bytes()
    assert all(c.encode() not in data for c in ODD_BREAKS)
    assert data.decode().splitlines() == data.decode().split("\n")[:-1]  # any reader splits it right
    second = call_with("another\u2028prompt", "reply", item="902")
    stage_writer.write_stage(directory, [second], keep=lambda call: True)  # an additive run reads it first
    assert {c.call.record.key for c in stage_reader.read_stage(directory)} == {
        first.record.key,
        second.record.key,
    }


def test_a_file_written_with_raw_separators_is_still_read(tmp_path: Path) -> None:
    """A recording written before the escape (raw U+2028 in its JSON strings) reads back whole."""
    directory = tmp_path / "judge"
    call = call_with("one\u2028two\x85three", "four\u2029five")
    stage_writer.write_stage(directory, [call])
    path = directory / stage_folders.CALLS_FILE
    raw = (
        path.read_text().replace("\\u2028", "\u2028").replace("\\u2029", "\u2029").replace("\\u0085", "\x85")
    )
    assert "\u2028" in raw
    path.write_text(raw)
    assert [c.call.record for c in stage_reader.read_stage(directory)] == [call.record]


def test_recordings_without_separators_keep_their_bytes(tmp_path: Path) -> None:
    """The escape touches only lines holding one of the three: every other line is as before."""
    call = call_with("plain\r\nprompt\x0bwith\x1ccontrols", "plain reply")
    blobs: dict[str, str] = {}
    line = line_format.call_to_line(call, blobs)
    from pipeline.llm.keys import canonical_json

    record = call.record.model_dump(mode="json")
    record["context"] = call.context.model_dump(mode="json", exclude_defaults=True)
    assert line == canonical_json(record)


text_with_breaks = st.text(
    alphabet=st.one_of(st.characters(codec="utf-8"), st.sampled_from(LINE_BREAKS)), max_size=600
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prompt=text_with_breaks, reply=text_with_breaks)
def test_write_then_read_round_trips_any_text(tmp_path: Path, prompt: str, reply: str) -> None:
    call = call_with(prompt, reply)
    assert [c.record for c in round_trip(tmp_path / "judge", [call])] == [call.record]
