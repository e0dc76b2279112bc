"""`judgeloop audit --key`: one call by its key, read from the one shard of its stage that holds it
(key_reader.read_keys), shown as the other filters show it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.errors import CorruptRecordError
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.recordings import key_reader, line_checks, shards, stage_folders, stage_reader, stage_writer
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import CallContext
from pipeline.tools.cli import main
from tests.helpers import request
from tests.project import recorded_project
from tests.test_recordings_shards import TRANSCRIPT


def audit(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["audit", *args])
    return result.exit_code, result.stdout, result.stderr


def jsonl(*args: str) -> list[dict[str, object]]:
    code, out, err = audit(*args, "--format", "jsonl")
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


def parsed_lines(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The lines line_checks.parse_call_line parses from now on, each as it is parsed (and parsed)."""
    parsed: list[str] = []
    real_parse = line_checks.parse_call_line

    def parsing(line: str, *args: object, **kwargs: bool) -> RecordedCall:
        parsed.append(line)
        return real_parse(line, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(line_checks, "parse_call_line", parsing)
    return parsed


def test_a_key_shows_the_call_its_item_iteration_and_metric_show(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    recorded_project(tmp_path)
    [judged] = [json.loads(line) for line in Path("outputs/paper/judgements.jsonl").read_text().splitlines()][
        :1
    ]
    [key] = judged["metrics"]["accuracy"]["call_keys"]
    by_context = jsonl(
        "--stage", "judge", "--item", judged["item"], "--iteration", "0", "--metric", "accuracy"
    )
    assert [call["key"] for call in by_context] == [key]
    assert jsonl("--key", key) == by_context  # every stage asked, the one holding it answers
    assert jsonl("--key", key, "--stage", "judge") == by_context
    code, text, _ = audit("--key", key)
    assert code == 0 and f"key         {key}" in text and "record      verifies" in text
    # Other filters still apply to the key's call, and say which one left nothing.
    code, _, err = audit("--key", key, "--metric", "coherence")
    assert code == 1 and "no recorded call matches --metric coherence (of the calls of --key" in err
    assert "The metrics recorded there: accuracy." in err
    code, _, err = audit("--key", "jl2:" + "0" * 32)
    assert code == 1 and "no recorded call has key jl2:00000000000000000000000000000000 in any stage" in err
    code, _, err = audit("--key", key, "--stage", "assess")
    assert code == 1 and "in stage assess" in err


def _stage(directory: Path, stage: str, n: int) -> list[RecordedCall]:
    fake = FakeBackend()
    calls = []
    for i in range(n):
        req = request(f"{stage} metric {i}.\nThe transcript:\n{TRANSCRIPT}\n\nAssessment {i}")
        context = CallContext(stage=stage, item=f"{900 + i % 5}", step=i // 5)
        calls.append(
            RecordedCall(context=context, record=CallRecord.new(fake.identity(), req, fake.chat(req)))
        )
    stage_writer.write_stage(directory / stage, calls)
    return calls


def test_a_key_is_read_from_one_shard_of_calls_in_each_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shards, "SHARD_AT", 8)
    root = tmp_path / "recordings"
    judged = _stage(root, "judge", 40)
    _stage(root, "assess", 40)
    _stage(root, "small", 5)  # one file: its lines that show the key parsed, none here
    monkeypatch.chdir(tmp_path)  # no params.yaml: the folder alone is audited
    read: list[str] = []
    real = shards.shard_bytes

    def counting(directory: Path, name: str, sha: str, given: dict[str, bytes] | None) -> bytes:
        if given is None:
            read.append(f"{directory.name}/{name}")
        return real(directory, name, sha, given)

    monkeypatch.setattr(shards, "shard_bytes", counting)
    parsed = parsed_lines(monkeypatch)
    wanted = judged[17].record.key
    [shown] = jsonl("--key", wanted, "--recordings", str(root))
    assert shown["key"] == wanted and shown["context"] == judged[17].context.model_dump(mode="json")
    assert shown["problem"] is None
    assert len(parsed) == 1  # that line alone
    shard = ("calls", shards.shard_of(wanted))
    calls_read = [name for name in read if name.split("/")[1].startswith("calls-")]
    assert sorted(name.split("/")[0] for name in calls_read) == ["assess", "judge"]  # one shard each
    assert all(shards.prefix_of(name.split("/")[1]) == shard for name in calls_read)
    assert not [name for name in read if name.startswith("assess/blocks-")]  # nothing found there
    assert len(read) <= 2 + 16  # and of the judge's block shards, those its line names


def test_an_edited_record_found_by_key_is_shown_untrusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "recordings"
    [call] = _stage(root, "judge", 1)
    path = root / "judge" / stage_folders.CALLS_FILE
    text = path.read_text(encoding="utf-8")
    assert text.count(call.record.reply.text) == 1
    path.write_text(text.replace(call.record.reply.text, "Score: 5"), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    [shown] = jsonl("--key", call.record.key, "--recordings", str(root))
    assert shown["reply"]["text"] == "Score: 5"  # type: ignore[index]
    assert "checksum does not match" in str(shown["problem"])


def test_read_keys_in_one_file_parses_only_the_lines_of_its_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _stage(tmp_path, "judge", 6)
    directory = tmp_path / "judge"
    parsed = parsed_lines(monkeypatch)
    wanted = [calls[4].record.key, calls[1].record.key]
    found = list(key_reader.read_keys(directory, wanted))
    assert sorted(c.call.record.key for c in found) == sorted(wanted) and len(parsed) == 2
    whole = {c.call.record.key: c for c in stage_reader.read_stage(directory)}
    assert all(
        c.call == whole[c.call.record.key].call and c.line == whole[c.call.record.key].line for c in found
    )
    assert list(key_reader.read_keys(directory, ["jl2:" + "0" * 32])) == []


@pytest.mark.parametrize("sharded", [False, True])
def test_read_keys_finds_a_block_line_not_as_written_by_reading_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sharded: bool
) -> None:
    if sharded:
        monkeypatch.setattr(shards, "SHARD_AT", 8)
    calls = _stage(tmp_path, "judge", 12)
    directory = tmp_path / "judge"
    wanted = calls[3]

    def redone(text: str) -> bytes:  # every block line written with spaces: `{"blob": "<id>", "text": ...}`
        out = ""
        for line in text.splitlines():
            if line.startswith('{"blob":'):
                line = json.dumps(json.loads(line), ensure_ascii=False)
            out += line + "\n"
        return out.encode("utf-8")

    manifest = directory / stage_folders.CALLS_FILE
    if sharded:  # each block shard written again under its new content's name, and named so
        named = []
        for name, sha in shards.parse_manifest(manifest, manifest.read_text(encoding="utf-8")):
            kind, prefix = shards.prefix_of(name)
            if kind == "blocks":
                data = redone((directory / name).read_text(encoding="utf-8"))
                (directory / name).unlink()
                name, sha = shards.write_shard(directory, kind, prefix, [data])
            named.append((name, sha))
        shards.commit(manifest, named)
    else:
        manifest.write_bytes(redone(manifest.read_text(encoding="utf-8")))
    [found] = key_reader.read_keys(directory, [wanted.record.key])
    assert found.call == wanted


def test_read_keys_in_one_file_checks_the_blocks_it_reads(tmp_path: Path) -> None:
    [call] = _stage(tmp_path, "judge", 1)
    directory = tmp_path / "judge"
    path = directory / stage_folders.CALLS_FILE
    lines = path.read_text(encoding="utf-8").splitlines()
    edited = [line.replace("sleep", "SLEEP", 1) if line.startswith('{"blob":') else line for line in lines]
    assert edited != lines
    path.write_text("".join(line + "\n" for line in edited), encoding="utf-8")
    with pytest.raises(CorruptRecordError, match="does not hash to its id"):
        list(key_reader.read_keys(directory, [call.record.key]))
    [unverified] = key_reader.read_keys(directory, [call.record.key], verify=False)
    assert unverified.call.record.problem() is not None  # shown, marked, by audit
    (directory / "calls-0-0123456789abcdef.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(CorruptRecordError):
        list(key_reader.read_keys(directory, [call.record.key], verify=False))


def test_read_keys_in_one_file_refuses_a_line_it_reads_that_is_not_utf8(tmp_path: Path) -> None:
    calls = _stage(tmp_path, "judge", 3)
    path = tmp_path / "judge" / stage_folders.CALLS_FILE
    data = path.read_bytes()
    mark = f'"key":"{calls[1].record.key}"'.encode()
    at = data.index(mark)
    path.write_bytes(data[:at] + b"\xff" + data[at:])
    with pytest.raises(CorruptRecordError, match=r"calls\.jsonl:\d+: byte 0xff is not UTF-8"):
        list(key_reader.read_keys(path.parent, [calls[1].record.key], verify=False))
    [other] = key_reader.read_keys(path.parent, [calls[0].record.key], verify=False)
    assert other.call == calls[0]  # a line it does not read is not its concern
