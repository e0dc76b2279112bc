"""The readers in pipeline.data that every design and tool shares: results and plain records as
JSON lines (jsonl), and recorded calls by key (recorded_calls)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.data.jsonl import Result, read_jsonl, read_records, write_jsonl, write_records
from pipeline.data.recorded_calls import first_by_key, recorded_calls
from pipeline.errors import CorruptRecordError, InputError, UnwritableTextError
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.keys import canonical_json
from pipeline.llm.recordings import stage_folders, stage_writer
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import CallContext
from tests.helpers import request


class Row(Result):
    item: str
    score: int | None


def test_results_are_written_sorted_by_item_and_records_in_the_order_given(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "rows.jsonl", [Row(item="b", score=2), Row(item="a", score=None)])
    assert (tmp_path / "rows.jsonl").read_text() == '{"item":"a","score":null}\n{"item":"b","score":2}\n'
    assert read_jsonl(tmp_path / "rows.jsonl", Row) == [Row(item="a", score=None), Row(item="b", score=2)]
    write_records(tmp_path / "out" / "records.jsonl", [{"z": 1, "a": "é"}, {"b": [2]}])
    assert (tmp_path / "out" / "records.jsonl").read_text() == '{"a":"é","z":1}\n{"b":[2]}\n'
    assert read_records(tmp_path / "out" / "records.jsonl") == [{"a": "é", "z": 1}, {"b": [2]}]
    assert not list(tmp_path.glob("**/*.tmp"))


@pytest.mark.parametrize("read", [lambda p: read_jsonl(p, Row), read_records])
def test_a_bad_line_names_the_file_and_the_line(tmp_path: Path, read) -> None:
    path = tmp_path / "rows.jsonl"
    with pytest.raises(InputError, match="file not found"):
        read(path)
    path.write_text('{"item":"a","score":1}\n{"item": "b", oops\n')
    with pytest.raises(InputError) as error:
        read(path)
    assert f"{path}:2" in str(error.value) and "re-run the stage" in str(error.value)


def _call(stage: str, text: str, item: str = "1") -> RecordedCall:
    fake = FakeBackend()
    req = request(text)
    return RecordedCall(
        CallContext(stage=stage, item=item), CallRecord.new(fake.identity(), req, fake.chat(req))
    )


def test_recorded_calls_by_key_from_every_stage_or_one(tmp_path: Path) -> None:
    judge, refine, assess = (
        _call("judge", "Judge it."),
        _call("refine", "Judge it.", "2"),
        _call("assess", "Assess."),
    )
    assert judge.record.key == refine.record.key  # the same request, recorded by two stages
    stage_writer.write_stage(tmp_path / "judge", [judge])
    stage_writer.write_stage(tmp_path / "refine", [refine])
    stage_writer.write_stage(tmp_path / "assess", [assess])
    every = recorded_calls(tmp_path)
    assert set(every) == {judge.record.key, assess.record.key}
    assert every[judge.record.key] == judge  # the first copy by stage name, as a replay is served
    assert recorded_calls(tmp_path / "refine") == {refine.record.key: refine}
    assert recorded_calls(tmp_path / "not-recorded") == {}
    assert first_by_key([refine, judge]) == {judge.record.key: refine}


def test_a_record_edited_by_hand_stops_a_verified_read_only(tmp_path: Path) -> None:
    call = _call("judge", "Judge it.")
    stage_writer.write_stage(tmp_path / "judge", [call])
    calls = tmp_path / "judge" / stage_folders.CALLS_FILE
    calls.write_text(calls.read_text().replace("Judge it.", "Judge it!"))
    with pytest.raises(CorruptRecordError, match="cannot be trusted"):
        recorded_calls(tmp_path)
    (edited,) = recorded_calls(tmp_path, verify=False).values()
    assert edited.record.problem() is not None


def test_write_records_streams_the_same_bytes_and_refuses_a_lone_surrogate_by_line(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    records = [{"item": str(i), "text": "é" * i} for i in range(5)]
    write_records(path, iter(records))  # a generator: written a line at a time (issue 33)
    assert path.read_bytes() == "".join(canonical_json(r) + "\n" for r in records).encode("utf-8")
    with pytest.raises(UnwritableTextError, match=r"out.jsonl: not written: line 3 would hold a lone"):
        write_records(path, [{"a": 1}, {"a": 2}, {"a": "\ud800"}, {"a": 4}])
    assert path.read_bytes() == "".join(canonical_json(r) + "\n" for r in records).encode("utf-8")
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]  # no temporary file left
