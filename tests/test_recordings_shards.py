"""A stage's recording past shards.SHARD_AT calls is written in shards by key (issue 33, proposal 3):
it round-trips, a changed call rewrites one shard only, strays and edits are refused, a failed write
leaves the old recording whole, and a reader of one key reads one shard."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline.data.recorded_calls import recorded_calls
from pipeline.errors import CorruptRecordError, UnwritableTextError
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.files import locked
from pipeline.llm.recordings import key_reader, line_checks, shards, stage_folders, stage_reader, stage_writer
from pipeline.llm.recordings.index import RecordingIndex
from pipeline.llm.recordings.item_reader import read_items
from pipeline.llm.recordings.stage_index import index_stage
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import CallContext
from pipeline.tools import inventory
from tests.helpers import make_session, request
from tests.test_recordings import _as_written_by_recipe_1

TRANSCRIPT = "\n".join(f"Participant: line {i} about sleep and mood {i * 7919 % 1000}" for i in range(300))


def _calls(n: int, *, salt: str = "") -> list[RecordedCall]:
    fake = FakeBackend()
    calls = []
    for i in range(n):
        req = request(f"Judge metric {i}{salt}.\nThe transcript:\n{TRANSCRIPT}\n\nAssessment {i}")
        record = CallRecord.new(fake.identity(), req, fake.chat(req))
        ctx = CallContext(stage="judge", item=f"{900 + i % 5}", step=i // 5)
        calls.append(RecordedCall(context=ctx, record=record))
    return calls


def _shard_files(directory: Path) -> dict[str, int]:
    return {p.name: p.stat().st_ino for p in directory.iterdir() if shards.SHARD_NAME.fullmatch(p.name)}


def _by_key(calls: list[RecordedCall]) -> list[RecordedCall]:
    return sorted(calls, key=lambda c: (c.record.key, c.context.item))


def test_a_recording_at_or_below_the_threshold_is_one_file(tmp_path: Path, small_threshold: None) -> None:
    stage_writer.write_stage(tmp_path / "judge", _calls(8))
    assert [p.name for p in (tmp_path / "judge").iterdir()] == [stage_folders.CALLS_FILE]


def test_a_recording_past_the_threshold_round_trips_in_shards(tmp_path: Path, small_threshold: None) -> None:
    calls = _calls(40)
    directory = tmp_path / "judge"
    stage_writer.write_stage(directory, calls)
    files = _shard_files(directory)
    assert 2 <= len(files) <= 48  # 16 of calls, 16 of blocks, 16 tables of items at most
    manifest = (directory / stage_folders.CALLS_FILE).read_text()
    assert manifest.startswith(shards.MANIFEST_OPENING) and manifest.count("\n") == len(files)
    for name in files:  # a calls shard holds its keys' calls only, a blocks shard its blocks only
        kind, prefix = shards.prefix_of(name)
        lines = (directory / name).read_text().splitlines()
        if kind == "blocks":
            assert lines and all(line.startswith(f'{{"blob":"{prefix}') for line in lines)
            continue
        if kind == shards.TABLE_KIND:  # its shard of calls' (pipeline.llm.recordings.item_table)
            assert f'"shard":"calls-{prefix}-' in lines[0]
            continue
        keys = [line.split('"key":"')[1].split('"')[0] for line in lines]
        assert keys and {shards.shard_of(key) for key in keys} == {prefix}
    # the transcript every call holds is stored once, not once per shard of calls
    stored = sum(p.stat().st_size for p in directory.iterdir())
    assert stored < len(TRANSCRIPT) * 1.5 + 40 * 3_000
    loaded = [c.call for c in stage_reader.read_stage(directory)]
    assert _by_key(loaded) == _by_key(calls)
    index = index_stage(directory)
    assert all(index.call(c.record.key) == c for c in calls)
    assert len(list(read_items(directory, ["901"]))) == 8
    # the same calls in another order give the same files, byte for byte
    again = tmp_path / "again"
    stage_writer.write_stage(again, list(reversed(calls)))
    assert sorted(os.listdir(again)) == sorted(os.listdir(directory))
    assert (again / stage_folders.CALLS_FILE).read_bytes() == (
        directory / stage_folders.CALLS_FILE
    ).read_bytes()


def test_a_rerun_that_changes_one_call_rewrites_one_shard(tmp_path: Path, small_threshold: None) -> None:
    calls = _calls(40)
    directory = tmp_path / "judge"
    stage_writer.write_stage(directory, calls)
    before = _shard_files(directory)
    changed = _calls(1, salt=" again")[0]
    replaced = [*calls[:-1], RecordedCall(context=calls[-1].context, record=changed.record)]
    stage_writer.write_stage(directory, replaced)
    after = _shard_files(directory)
    gone, new = set(before) - set(after), set(after) - set(before)
    prefixes = {shards.shard_of(calls[-1].record.key), shards.shard_of(changed.record.key)}
    new_calls = {shards.prefix_of(n)[1] for n in new if n.startswith("calls-")}
    assert new_calls == prefixes and len([n for n in gone if n.startswith("calls-")]) == len(prefixes)
    # its prompt's own first block is new, the old one gone: at most two shards of blocks besides
    assert len([n for n in new if n.startswith("blocks-")]) <= 2
    assert len(set(before) & set(after)) >= len(before) - 6  # and the two shards' tables of items
    for name in set(before) & set(after):  # untouched: the same file, not rewritten
        assert before[name] == after[name]
    assert _by_key([c.call for c in stage_reader.read_stage(directory)]) == _by_key(replaced)


def test_a_stray_or_look_alike_shard_is_refused(tmp_path: Path, small_threshold: None) -> None:
    directory = tmp_path / "judge"
    stage_writer.write_stage(directory, _calls(40))
    name = sorted(_shard_files(directory))[0]
    for stray in ("calls-0-0123456789abcdef.jsonl", "calls-3f.jsonl", "CALLS-1-x.jsonl"):
        (directory / stray).write_bytes((directory / name).read_bytes())
        with pytest.raises(CorruptRecordError, match=rf"{stray}: looks like a shard.*Fix: delete it"):
            list(stage_reader.read_stage(directory))
        (directory / stray).unlink()
    assert len(list(stage_reader.read_stage(directory))) == 40


def test_an_edited_or_missing_shard_is_refused(tmp_path: Path, small_threshold: None) -> None:
    directory = tmp_path / "judge"
    stage_writer.write_stage(directory, _calls(40))
    name = sorted(n for n in _shard_files(directory) if n.startswith("calls-"))[0]
    data = (directory / name).read_bytes()
    (directory / name).write_bytes(data.replace(b"Assessment", b"Assessmend", 1))
    with pytest.raises(CorruptRecordError, match=rf"{name}: does not hash.*Fix"):
        list(stage_reader.read_stage(directory))
    (directory / name).unlink()
    with pytest.raises(CorruptRecordError, match=rf"{name}: named by calls.jsonl but missing"):
        list(stage_reader.read_stage(directory))
    index = RecordingIndex(tmp_path)  # a session leaves the stage out whole, saying why
    with pytest.raises(CorruptRecordError, match="missing"):
        index.own("0" * 64, "judge")


def test_a_manifest_naming_a_path_outside_the_folder_is_refused(
    tmp_path: Path, small_threshold: None
) -> None:
    directory = tmp_path / "judge"
    stage_writer.write_stage(directory, _calls(40))
    manifest = directory / stage_folders.CALLS_FILE
    text = manifest.read_text()
    first = text.split("\n")[0]
    name = first.split('"shard":"')[1].split('"')[0]
    manifest.write_text(text.replace(name, f"../{name}", 1))
    with pytest.raises(CorruptRecordError, match=r"calls.jsonl:1: not a shard of the manifest"):
        list(stage_reader.read_stage(directory))


def test_a_failed_write_leaves_the_old_recording_whole(
    tmp_path: Path, small_threshold: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _calls(40)
    directory = tmp_path / "judge"
    stage_writer.write_stage(directory, calls)
    files = sorted(os.listdir(directory))
    real = shards.write_shard
    count = 0

    def failing(*args: object, **kwargs: object) -> tuple[str, str]:
        nonlocal count
        count += 1
        if count == 3:
            raise OSError("disk full")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(shards, "write_shard", failing)
    with pytest.raises(OSError, match="disk full"):
        stage_writer.write_stage(directory, _calls(40, salt=" new"))
    assert sorted(os.listdir(directory)) == files
    assert _by_key([c.call for c in stage_reader.read_stage(directory)]) == _by_key(calls)


def test_from_sharded_back_to_one_file(tmp_path: Path, small_threshold: None) -> None:
    directory = tmp_path / "judge"
    stage_writer.write_stage(directory, _calls(40))
    stage_writer.write_stage(directory, _calls(5))
    assert os.listdir(directory) == [stage_folders.CALLS_FILE]
    assert len(list(stage_reader.read_stage(directory))) == 5


def test_a_sharded_recording_replays_byte_identically(tmp_path: Path, small_threshold: None) -> None:
    first = tmp_path / "first"
    session, _ = make_session(first)
    for i in range(20):
        session.chat(request(f"Score this {i}\n{TRANSCRIPT}"), CallContext(stage="judge", item=f"{i}"))
    session.close()
    recorded = first / "recordings" / "judge"
    assert _shard_files(recorded)
    before = {p.name: p.read_bytes() for p in recorded.iterdir()}
    replay, fake = make_session(first, "replay")
    for i in range(20):
        replay.chat(request(f"Score this {i}\n{TRANSCRIPT}"), CallContext(stage="judge", item=f"{i}"))
    replay.close()
    assert fake.calls == []
    assert {p.name: p.read_bytes() for p in recorded.iterdir()} == before


def test_a_reader_of_one_key_reads_one_shard(
    tmp_path: Path, small_threshold: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _calls(40)
    directory = tmp_path / "judge"
    stage_writer.write_stage(directory, calls)
    read: list[str] = []
    real = shards.shard_bytes

    def counting(directory: Path, name: str, sha: str, given: dict[str, bytes] | None) -> bytes:
        if given is None:  # read from disk (then checked again as given, parsed)
            read.append(name)
        return real(directory, name, sha, given)

    monkeypatch.setattr(shards, "shard_bytes", counting)
    wanted = calls[7]
    found = list(key_reader.read_keys(directory, [wanted.record.key]))
    assert [loaded.call for loaded in found] == [wanted]
    read_calls = [name for name in read if name.startswith("calls-")]
    assert read_calls == [found[0].path.name] and found[0].line >= 1  # named by its shard and line there
    assert shards.prefix_of(read_calls[0]) == ("calls", shards.shard_of(wanted.record.key))
    assert len(read) < len(_shard_files(directory)) / 2  # and the few block shards its line refers to
    assert list(key_reader.read_keys(directory, ["jl2:" + "f" * 32])) == []
    # an edited shard is refused by the reader of one key too, and a stray beside it
    shard = directory / read_calls[0]
    shard.write_bytes(shard.read_bytes().replace(b"Assessment", b"X", 1))
    with pytest.raises(CorruptRecordError, match="does not hash"):
        list(key_reader.read_keys(directory, [wanted.record.key]))
    # one file below the threshold: read whole, filtered
    small = tmp_path / "small"
    stage_writer.write_stage(small, calls[:5])
    assert [c.call for c in key_reader.read_keys(small, [calls[2].record.key])] == [calls[2]]


def test_read_keys_finds_the_lines_that_show_a_key(tmp_path: Path, small_threshold: None) -> None:
    """read_keys finds a call by the key its line shows as written, in a sharded recording: a key
    recorded under two items gives both; a call under the older key recipe shows its old key, and is
    found by that key read unverified (as audit --key reads), not by today's key, under which
    read_stage, which re-derives every key, serves it."""
    calls = _calls(12)
    twice, older = calls[0], calls[1]
    calls.append(RecordedCall(context=CallContext(stage="judge", item="999"), record=twice.record))
    old_record = _as_written_by_recipe_1(older.record)
    calls[1] = RecordedCall(context=older.context, record=old_record)
    directory = tmp_path / "judge"
    stage_writer.write_stage(directory, calls)
    assert shards.is_manifest((directory / stage_folders.CALLS_FILE).read_text())
    assert old_record.key != older.record.key

    def items(keys: set[str], *, verify: bool = True) -> list[tuple[str, str]]:
        found = key_reader.read_keys(directory, keys, verify=verify)
        return sorted((c.call.record.key, c.call.context.item) for c in found)

    assert items({twice.record.key}) == sorted(
        [(twice.record.key, twice.context.item), (twice.record.key, "999")]
    )
    assert items({older.record.key}) == []
    assert items({old_record.key}, verify=False) == [(old_record.key, older.context.item)]
    whole = [(c.call.record.key, c.call.context.item) for c in stage_reader.read_stage(directory)]
    assert (older.record.key, older.context.item) in whole


def test_a_writers_shards_before_its_manifest_are_not_strays(tmp_path: Path, small_threshold: None) -> None:
    """While a writer holds the folder's lock, the shards it has written are there before the
    manifest names them: a reader then reads the old recording, and refuses them only once no
    writer holds the lock (one killed half-way)."""
    directory = tmp_path / "judge"
    calls = _calls(40)
    stage_writer.write_stage(directory, calls)
    name = sorted(_shard_files(directory))[0]
    stray = directory / "calls-0-0123456789abcdef.jsonl"
    stray.write_bytes((directory / name).read_bytes())
    with locked(directory):
        assert len(list(stage_reader.read_stage(directory))) == 40
    with pytest.raises(CorruptRecordError, match="looks like a shard"):
        list(stage_reader.read_stage(directory))


def test_a_manifest_replaced_between_two_reads_is_read_again(
    tmp_path: Path, small_threshold: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "judge"
    stage_writer.write_stage(directory, _calls(40))
    newer = _calls(40, salt=" newer")
    real = line_checks.recording_text
    replaced = False

    def racing(path: Path, data: bytes | None = None) -> str:
        nonlocal replaced
        text = real(path, data)
        if path.name == stage_folders.CALLS_FILE and data is None and not replaced:
            replaced = True
            stage_writer.write_stage(directory, newer)  # a writer, just after this read
        return text

    monkeypatch.setattr(stage_reader, "recording_text", racing)
    assert _by_key([c.call for c in stage_reader.read_stage(directory)]) == _by_key(newer)


def test_the_tools_inventory_reads_a_sharded_recording_and_names_a_bad_call_by_its_shard(
    tmp_path: Path, small_threshold: None
) -> None:
    """cache verify, gc and audit's scan (pipeline.tools.inventory) and the report's reader
    (pipeline.data.recorded_calls) read a sharded stage as they read one file."""
    calls = _calls(40)
    root = tmp_path / "recordings"
    stage_writer.write_stage(root / "judge", calls)
    problems: list[str] = []
    found = list(inventory.recorded_calls(root, problems))
    assert problems == [] and _by_key([call for _, _, call in found]) == _by_key(calls)
    assert all(path.name.startswith("calls-") and line >= 1 for path, line, _ in found)
    assert len(recorded_calls(root)) == 40
    path, line, _ = found[5]
    text = path.read_text().split("\n")
    text[line - 1] = text[line - 1].replace('"checksum":"sha256:', '"checksum":"sha256:0', 1)
    path.write_text("\n".join(text))  # a look-alike of its shard: refused whole by its hash
    problems = []
    assert list(inventory.recorded_calls(root, problems)) == []
    assert len(problems) == 1 and f"{path}: does not hash" in problems[0]


def test_a_call_utf8_cannot_hold_stops_a_sharded_write_and_leaves_the_old_one(
    tmp_path: Path, small_threshold: None
) -> None:
    calls = _calls(40)
    directory = tmp_path / "judge"
    stage_writer.write_stage(directory, calls)
    files = sorted(os.listdir(directory))
    bad = RecordedCall(context=CallContext(stage="judge", item="9\ud800"), record=calls[0].record)
    with pytest.raises(UnwritableTextError, match=r"calls\.jsonl: not written: a call would hold a lone"):
        stage_writer.write_stage(directory, [*calls, bad])
    assert sorted(os.listdir(directory)) == files
    assert _by_key([c.call for c in stage_reader.read_stage(directory)]) == _by_key(calls)
