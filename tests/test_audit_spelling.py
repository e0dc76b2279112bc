"""`audit --item` and `audit --key` find a call whose item or key its line spells otherwise than the
writer does (JSON escapes, whitespace): such a line is valid JSON, verifies like any line (the
checksum is over the parsed record, the context is not in it) and a full read serves it, so the
byte searches of read_items and read_keys must not pass it by (exactness: every call, per item), nor
miss the blocks such a line refers to with references spelled otherwise."""

from __future__ import annotations

import json
import random
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.llm.recordings import key_reader, shards, stage_folders, stage_reader
from pipeline.llm.recordings.item_reader import read_items
from pipeline.llm.records import RecordedCall
from pipeline.llm.types import CallContext
from tests.helpers import make_session, request
from tests.test_audit_keys import _stage, parsed_lines
from tests.test_recordings_shards import TRANSCRIPT


def _escaped(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in text)


def _respell(directory: Path, old: str, new: str) -> None:
    """Replace `old` by `new` once in the stage's call lines, in one file or in its shard (written
    again under its new content's name, and named so in the manifest)."""
    manifest = directory / stage_folders.CALLS_FILE
    text = manifest.read_text(encoding="utf-8")
    if not shards.is_manifest(text):
        assert text.count(old) >= 1
        manifest.write_text(text.replace(old, new, 1), encoding="utf-8")
        return
    named, done = [], False
    for name, sha in shards.parse_manifest(manifest, text):
        shard = (directory / name).read_text(encoding="utf-8")
        if not done and old in shard:
            (directory / name).unlink()
            kind, prefix = shards.prefix_of(name)
            name, sha = shards.write_shard(
                directory, kind, prefix, [shard.replace(old, new, 1).encode("utf-8")]
            )
            done = True
        named.append((name, sha))
    assert done
    shards.commit(manifest, named)


@dataclass(frozen=True)
class LaidOut:
    """A stage of 12 calls in one file, in shards, or in the two-file layout of old (its blocks in
    blobs.jsonl, which a reader reads whole)."""

    calls: list[RecordedCall]
    directory: Path
    layout: str

    def respelled(self, old: str, new: str) -> None:
        """`old` replaced by `new` once in the stage's call lines, then laid out as `layout` says."""
        _respell(self.directory, old, new)
        if self.layout == "legacy":
            lines = (
                (self.directory / stage_folders.CALLS_FILE).read_bytes().split(b"\n")[:-1]
            )  # (a line may hold a \r)
            for name, blocks in ((stage_folders.CALLS_FILE, False), (stage_folders.LEGACY_BLOBS_FILE, True)):
                kept = [line + b"\n" for line in lines if line.startswith(b'{"blob":') == blocks]
                (self.directory / name).write_bytes(b"".join(kept))


@pytest.fixture(params=["one", "sharded", "legacy"])
def laid_out(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LaidOut:
    if request.param == "sharded":
        monkeypatch.setattr(shards, "SHARD_AT", 8)
    return LaidOut(_stage(tmp_path, "judge", 12), tmp_path / "judge", request.param)


ITEM_SPELLINGS: list[Callable[[str], str]] = [
    lambda item: f'"item":"{_escaped(item)}"',
    lambda item: f'"item":"{item[0]}{_escaped(item[1:])}"',
    lambda item: f'"{_escaped("item")}":"{item}"',
    lambda item: f'"item": "{item}"',
    lambda item: f'"item"\t:"{item}"',
]


@pytest.mark.parametrize("spelling", range(len(ITEM_SPELLINGS)))
def test_read_items_finds_a_line_whose_item_is_spelled_otherwise(laid_out: LaidOut, spelling: int) -> None:
    directory = laid_out.directory
    laid_out.respelled('"item":"901"', ITEM_SPELLINGS[spelling]("901"))
    whole = [c for c in stage_reader.read_stage(directory) if c.call.context.item == "901"]
    assert len(whole) == 3  # verified, every one of them, and read so by a full read
    found = list(read_items(directory, {"901"}))

    def placed(calls: list[stage_reader.LoadedCall]) -> list[tuple[Path, int, str]]:
        return sorted((c.path, c.line, repr(c.call)) for c in calls)

    assert placed(found) == placed(whole)
    assert sorted(c.call.context.item for c in read_items(directory, {"902"})) == ["902"] * 2


KEY_SPELLINGS: list[Callable[[str], str]] = [
    lambda key: f'"key":"{key[:4]}{_escaped(key[4:8])}{key[8:]}"',
    lambda key: f'"{_escaped("key")}":"{key}"',
    lambda key: f'"key" :"{key}"',
    lambda key: f'"key":\r"{key}"',
]


@pytest.mark.parametrize("spelling", range(len(KEY_SPELLINGS)))
def test_read_keys_finds_a_line_whose_key_is_spelled_otherwise(laid_out: LaidOut, spelling: int) -> None:
    calls, directory = laid_out.calls, laid_out.directory
    key = calls[5].record.key
    laid_out.respelled(f'"key":"{key}"', KEY_SPELLINGS[spelling](key))
    [whole] = [c for c in stage_reader.read_stage(directory) if c.call.record.key == key]  # verified
    for verify in (True, False):
        [found] = key_reader.read_keys(directory, [key], verify=verify)
        assert (found.path, found.line, found.call) == (whole.path, whole.line, whole.call)
    [other] = key_reader.read_keys(directory, [calls[6].record.key])
    assert other.call == calls[6]


@pytest.mark.parametrize("sought", ["item", "key"])
def test_a_line_of_another_item_or_key_spelled_otherwise_is_not_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sought: str
) -> None:
    # Only its JSON is read, for its item or key: the search stays a search.
    calls = _stage(tmp_path, "judge", 12)
    directory = tmp_path / "judge"
    for call in calls[2:4]:  # item 902's and 903's lines, one spelled with an escape, one with a space
        _respell(directory, f'"key":"{call.record.key}"', f'"key" :"{call.record.key}","x":"\\u0041"')
    parsed = parsed_lines(monkeypatch)
    if sought == "item":
        assert [c.call.context.item for c in read_items(directory, {"901"})] == ["901"] * 3
        assert len(parsed) == 3
    else:
        [found] = key_reader.read_keys(directory, [calls[1].record.key], verify=False)
        assert found.call == calls[1] and len(parsed) == 1


def _json_respelled(value: Any, rng: random.Random) -> str:
    """`value` as JSON spelled as JSON allows and the writer never writes: characters escaped at
    random, whitespace between tokens."""

    def ws() -> str:
        return rng.choice(["", "", "", " ", "\t", "\r", " \t"])

    if isinstance(value, dict):
        members = (
            f"{ws()}{_string_respelled(k, rng)}{ws()}:{ws()}{_json_respelled(v, rng)}{ws()}"
            for k, v in value.items()
        )
        return "{" + ",".join(members) + ws() + "}"
    if isinstance(value, list):
        return "[" + ",".join(ws() + _json_respelled(v, rng) + ws() for v in value) + ws() + "]"
    if isinstance(value, str):
        return _string_respelled(value, rng)
    return json.dumps(value)


def _string_respelled(text: str, rng: random.Random) -> str:
    out = []
    for char in text:
        if char == "/" and rng.random() < 0.3:
            out.append("\\/")
        elif rng.random() < 0.15 or char in '"\\' or ord(char) < 0x20:
            out.append(
                json.dumps(char, ensure_ascii=True)[1:-1] if ord(char) > 0xFFFF else f"\\u{ord(char):04x}"
            )
        else:
            out.append(char)  # \x85, U+2028 and U+2029 among them, raw
    return '"' + "".join(out) + '"'


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), opened=st.booleans())
def test_read_items_and_read_keys_find_every_call_however_its_line_is_spelled(
    tmp_path: Path, seed: int, opened: bool
) -> None:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(dir=tmp_path) as folder:
        calls = _stage(Path(folder), "judge", 8)
        directory = Path(folder) / "judge"
        path = directory / stage_folders.CALLS_FILE
        lines = path.read_bytes().split(b"\n")[:-1]
        respelled = []
        for line in lines:
            if line.startswith(b'{"checksum":') and rng.random() < 0.6:
                raw = json.loads(line)
                text = _json_respelled({k: v for k, v in raw.items() if k != "checksum"}, rng)[1:]
                opening = '{"checksum":' if opened else "{" + _string_respelled("checksum", rng) + ":"
                line = (opening + json.dumps(raw["checksum"]) + "," + text).encode("utf-8")
            respelled.append(line + b"\n")
        path.write_bytes(b"".join(respelled))
        whole = list(stage_reader.read_stage(directory))  # verified, every line
        assert len(whole) == len(calls)
        for item in {c.call.context.item for c in whole}:
            found = [(c.line, repr(c.call)) for c in read_items(directory, {item})]
            assert sorted(found) == sorted(
                (c.line, repr(c.call)) for c in whole if c.call.context.item == item
            )
        for call in whole:
            [found_key] = key_reader.read_keys(directory, [call.call.record.key])
            assert (found_key.line, found_key.call) == (call.line, call.call)


def test_a_replay_keeps_the_blocks_a_line_refers_to_with_references_spelled_otherwise(tmp_path: Path) -> None:
    # A replay keeps each recorded line it serves verbatim, with the blocks it refers to
    # (line_format.blob_refs): a reference spelled `{"blob": "<id>"}` was passed by, the blocks left
    # out, and the recording written again broken ("refers to blob ..., which the recording does not hold").
    requests = [
        request(f"judge metric {i}.\nThe transcript:\n{TRANSCRIPT}\n\nAssessment {i}") for i in range(3)
    ]
    session, _ = make_session(tmp_path, "auto")
    for i, asked in enumerate(requests):
        session.chat(asked, CallContext(stage="judge", item=str(900 + i)))
    session.close()
    path = tmp_path / "recordings" / "judge" / stage_folders.CALLS_FILE
    lines = path.read_text(encoding="utf-8").split("\n")
    respelled = [
        line.replace('{"blob":"', '{"blob": "') if line.startswith('{"checksum"') else line for line in lines
    ]
    assert respelled != lines
    path.write_text("\n".join(respelled), encoding="utf-8")
    whole = [c.call for c in stage_reader.read_stage(path.parent)]  # verified, every line
    session, fake = make_session(tmp_path, "replay")
    for i, asked in enumerate(requests):
        session.chat(asked, CallContext(stage="judge", item=str(900 + i)))
    session.close()
    assert fake.calls == [] and [c.call for c in stage_reader.read_stage(path.parent)] == whole
    assert [c.call for c in read_items(path.parent, {"901"})] == [whole[1]]
