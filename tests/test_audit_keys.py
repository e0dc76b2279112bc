"""`judgeloop audit --key`: one call by its key, read from the one shard of its stage that holds it
(recordings.read_keys), shown as the other filters show it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.recordings import shards
from pipeline.llm.recordings import text as recordings
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
    recordings.write_stage(directory / stage, calls)
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
    parsed: list[str] = []
    real_parse = recordings.parse_call_line

    def parsing(line: str, *args: object, **kwargs: bool) -> RecordedCall:
        parsed.append(line)
        return real_parse(line, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(recordings, "parse_call_line", parsing)
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
    path = root / "judge" / recordings.CALLS_FILE
    text = path.read_text(encoding="utf-8")
    assert text.count(call.record.reply.text) == 1
    path.write_text(text.replace(call.record.reply.text, "Score: 5"), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    [shown] = jsonl("--key", call.record.key, "--recordings", str(root))
    assert shown["reply"]["text"] == "Score: 5"  # type: ignore[index]
    assert "checksum does not match" in str(shown["problem"])
