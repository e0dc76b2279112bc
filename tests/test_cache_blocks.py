"""The local cache stores requests as references to content-addressed blocks (issue 33): an
interview is held once however many prompts carry it, and nothing of it is trusted unchecked."""

from __future__ import annotations

import sqlite3
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings

from pipeline.errors import CorruptRecordError
from pipeline.llm import blocks
from pipeline.llm.blocks import MAX_BLOCK, MIN_BLOCK, split_blocks
from pipeline.llm.bounds import MAX_LINE_BYTES
from pipeline.llm.cache.blocks import BlockStore, block_id, pack_request
from pipeline.llm.cache.store import SEED_BATCH, WHOLE_REQUEST, CallStore, seal
from pipeline.llm.recordings import stage_writer
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.session import LLMSession
from pipeline.llm.types import CallContext
from pipeline.testing.sessions import folder_session
from pipeline.tools.cli import main
from tests.block_prompts import FAKE, interview, lines, prompt, record
from tests.project import recorded_project


def blocks_line_by_line(text: str) -> list[str]:
    """The rule as the recordings first wrote it, a line at a time: what split_blocks must give."""
    blocks: list[str] = []
    current: list[str] = []
    size = 0
    for line in text.splitlines(keepends=True):
        current.append(line)
        size += len(line)
        if (zlib.crc32(line.encode("utf-8")) % 8 == 0 and size >= MIN_BLOCK) or size >= MAX_BLOCK:
            blocks.append("".join(current))
            current, size = [], 0
    if current:
        blocks.append("".join(current))
    return blocks


# No deadline or speed check: a loaded CI machine makes a 9,000-character example slow, not wrong.
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(lines)
def test_the_blocks_are_the_recordings_blocks(parts: list[str]) -> None:
    text = "".join(parts)
    assert split_blocks(text) == blocks_line_by_line(text)
    assert blocks.split_blocks is split_blocks  # one rule for both rooms
    assert "".join(split_blocks(text)) == text


def test_an_interview_in_many_prompts_is_stored_once(tmp_path: Path) -> None:
    text = interview()
    store = CallStore(tmp_path / "cache")
    records = [record(prompt(f"metric {i}", text)) for i in range(40)]
    for each in records:
        store.put(each)
    stored = store.blocks.cache
    blocks = sum(len(zlib.decompress(stored.get(ident))) for ident in stored.iterkeys())
    entries = sum(len(store.get_raw(each.key) or b"") for each in records)
    # The interview once, and each prompt's first block (its own text and the interview's first lines).
    assert len(text) < blocks < 2 * len(text)
    assert entries < 40 * len(text) / 5  # each entry is its header and its references, not the prompt
    for each in records:
        got = store.get(each.key)
        assert got == each and got.problem() is None  # rebuilt from its blocks, key and checksum hold
    store.close()


def stored(tmp_path: Path) -> tuple[CallStore, CallRecord]:
    store = CallStore(tmp_path / "cache")
    one = record(prompt("accuracy", interview()))
    store.put(one)
    return store, one


def test_a_missing_block_is_a_clear_error_never_another_request(tmp_path: Path) -> None:
    store, one = stored(tmp_path)
    _, blocks = pack_request(one.request)
    store.blocks.cache.delete(next(iter(blocks)))
    store.blocks.forget()
    assert store.get(one.key, one.request) == one  # a hit holds its own request: no block needed
    with pytest.raises(
        CorruptRecordError, match=r"refers to block [0-9a-f]{32}, which.*do not hold.*--repair"
    ):
        store.get(one.key)
    assert store.inspect(one.key)[1] is not None
    store.put(one)  # written again: its blocks with it
    assert store.get(one.key) == one
    store.close()


def test_a_damaged_block_is_refused(tmp_path: Path) -> None:
    store, one = stored(tmp_path)
    _, blocks = pack_request(one.request)
    ident = next(iter(blocks))
    store.blocks.cache.set(ident, zlib.compress(blocks[ident].replace(b"sleep", b"sheep")))
    store.blocks.forget()
    with pytest.raises(CorruptRecordError, match="does not hash to it"):
        store.get(one.key)
    store.blocks.cache.set(ident, blocks[ident])  # not compressed: not what judgeloop writes
    with pytest.raises(CorruptRecordError, match=r"stored bytes are damaged"):
        store.get(one.key)
    bomb = zlib.compress(b"\n" * (MAX_LINE_BYTES + 1))  # inflates past any block: never inflated whole
    store.blocks.cache.set(ident, bomb)
    with pytest.raises(CorruptRecordError, match=r"stored bytes are damaged"):
        store.get(one.key)
    store.close()


def test_a_damaged_stored_request_is_refused(tmp_path: Path) -> None:
    store, one = stored(tmp_path)
    raw = store.get_raw(one.key) or b""
    store.put_raw(one.key, raw[:-3] + b"xyz")
    with pytest.raises(CorruptRecordError, match=r"stored request is damaged.*--repair"):
        store.get(one.key)
    assert store.collect_blocks().deleted > 0  # an entry that cannot be read keeps no block
    store.close()


def test_a_block_store_verifies_what_it_reads(tmp_path: Path) -> None:
    store = CallStore(tmp_path / "cache")
    blocks: BlockStore = store.blocks
    blocks.add({block_id(b"text"): b"text"})
    assert blocks.text(block_id(b"text")) == "text"
    store.close()


def test_an_entry_of_the_previous_format_is_still_read(tmp_path: Path) -> None:
    store, one = stored(tmp_path)
    header = one.model_dump_json(exclude={"request"}).encode()
    old = WHOLE_REQUEST + seal(header) + b"\n" + header + b"\n" + one.request.model_dump_json().encode()
    store.put_raw(one.key, old)
    assert store.get(one.key) == one
    assert store.get(one.key, one.request) == one
    store.close()


def test_gc_collects_the_blocks_no_entry_refers_to(tmp_path: Path) -> None:
    store = CallStore(tmp_path / "cache")
    shared, own = interview(), interview(400)[len(interview()) :]
    kept, dropped = record(prompt("a", shared)), record(prompt("b", shared + own))
    store.put(kept)
    store.put(dropped)
    before = len(store.blocks.cache)
    assert store.collect_blocks().deleted == 0
    assert store.collect_blocks(dry_run=True, dropping=frozenset({dropped.key})).deleted > 0
    store.delete(dropped.key)
    collected = store.collect_blocks()
    assert collected.deleted > 0 and collected.freed > 0
    left = b"".join(zlib.decompress(store.blocks.cache.get(ident)) for ident in store.blocks.cache.iterkeys())
    assert b"line 350," not in left and b"line 150," in left  # the dropped entry's own text went
    assert len(store.blocks.cache) == before - collected.deleted
    assert store.get(kept.key) == kept  # what the kept entry refers to is all still there
    store.close()


def test_seeds_are_served_at_once_and_written_in_batches(tmp_path: Path) -> None:
    store = CallStore(tmp_path / "cache")
    local = record(prompt("local", "a line\n"))
    store.put(local)
    seeds = [record(prompt(f"seed {i}", interview(30))) for i in range(SEED_BATCH - 1)]
    for seed in seeds:
        store.seed(seed)
    assert seeds[0].key in store and store.get(seeds[0].key) == seeds[0]
    con = sqlite3.connect(tmp_path / "cache" / "cache.db")
    assert con.execute("SELECT count(*) FROM Cache").fetchone()[0] == 1  # gathered, not written yet
    store.seed(record(prompt("last", "x\n")))  # the batch is full: written in one transaction
    assert con.execute("SELECT count(*) FROM Cache").fetchone()[0] == SEED_BATCH + 1
    con.close()
    other = CallRecord.new(FAKE.identity(), local.request, FAKE.chat(prompt("other", "y\n")))
    store.seed(other)  # the same key, another reply: the entry stored stays
    store.close()
    again = CallStore(tmp_path / "cache")
    assert again.get(local.key) == local
    assert all(again.get(seed.key) == seed for seed in seeds)
    again.close()


def test_cache_commands_keep_working_on_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    recorded_project(tmp_path)
    runner = CliRunner()
    result = runner.invoke(main, ["cache", "verify"])
    assert result.exit_code == 0, result.output
    store = CallStore(Path(".judgeloop/cache"))
    ident = next(iter(store.blocks.cache.iterkeys()))
    store.blocks.cache.delete(ident)
    store.close()
    result = runner.invoke(main, ["cache", "verify"])
    assert result.exit_code == 1 and f"refers to block {ident}" in result.output
    result = runner.invoke(main, ["cache", "verify", "--repair"])
    assert "deleted local entry" in result.output
    assert runner.invoke(main, ["cache", "verify"]).exit_code == 0
    result = runner.invoke(main, ["cache", "gc"])
    assert result.exit_code == 0 and "text blocks" in result.output
    assert runner.invoke(main, ["cache", "seed"]).exit_code == 0
    assert runner.invoke(main, ["cache", "verify"]).exit_code == 0


def test_a_replay_seeds_the_local_cache_which_then_serves_offline(tmp_path: Path) -> None:
    """Calls served from a stage's recording are copied into the local cache (batched, written by
    close), whole and verifiable: with the recordings gone, the cache alone still serves them."""
    requests = [prompt(f"metric {i}", interview()) for i in range(12)]
    context = CallContext(stage="judge", item="1")
    stage_writer.write_stage(
        tmp_path / "recordings" / "judge", [RecordedCall(context=context, record=record(r)) for r in requests]
    )

    def session(root: str) -> LLMSession:
        return folder_session(tmp_path, FAKE, mode="replay", recordings=root)

    replay = session("recordings")
    served = [replay.chat(r, context).record for r in requests]
    replay.close(write_recording=False)
    store = CallStore(tmp_path / "cache")
    assert len(store) == len(requests)
    assert all(store.get(each.key) == each and each.problem() is None for each in served)
    store.close()
    offline = session("elsewhere")  # no recordings at all: the local cache serves every call
    assert [offline.chat(r, context).record for r in requests] == served
    offline.close(write_recording=False)
