"""A cold local cache is seeded from the recording's own blocks (issue 33): the layout of a served,
verified line is packed into the cache's entry where it is the rule's own cut, instead of cutting
and hashing every prompt again; the entry is the bytes a live call writes, and nothing the
recording does not vouch for is seeded."""

from __future__ import annotations

import gc
import itertools
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.errors import CorruptRecordError
from pipeline.llm.blocks import MIN_BLOCK, Laid, block_fits, split_blocks
from pipeline.llm.cache import blocks as cache_blocks
from pipeline.llm.cache.blocks import laid_text, pack_laid, pack_text
from pipeline.llm.cache.store import CallStore
from pipeline.llm.keys import canonical_json
from pipeline.llm.recordings import layouts, line_format, stage_folders, stage_reader, stage_writer
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.session import LLMSession, RecordingIndex
from pipeline.llm.types import CallContext, ChatRequest
from tests.block_prompts import FAKE, interview, lines, prompt, record

CONTEXT = CallContext(stage="judge", item="1")

SLOW_OK = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def recording_layout(text: str) -> Laid:
    """The layout a recording's line gives `text`, as its writer packs it and its reader lays it out."""
    blobs: dict[str, str] = {}
    content = line_format.pack_content(text, blobs)
    layout: list[Laid] = []
    assert line_format.unpack_content(content, blobs, "x:1", layout) == text
    return layout[0]


@SLOW_OK
@given(lines)
def test_a_recordings_layout_packs_as_the_text_itself(parts: list[str]) -> None:
    text = "".join(parts)
    laid_blocks: dict[str, bytes | str] = {}
    cut_blocks: dict[str, bytes] = {}
    assert laid_text(recording_layout(text), text, laid_blocks) == pack_text(text, cut_blocks)
    assert {
        ident: str(data) if isinstance(data, str) else data.decode() for ident, data in laid_blocks.items()
    } == {ident: data.decode() for ident, data in cut_blocks.items()}
    blocks = split_blocks(text)
    for at, block in enumerate(blocks):
        if len(block) >= MIN_BLOCK:
            assert block_fits(block)[at == len(blocks) - 1]


@SLOW_OK
@given(lines, st.lists(st.tuples(st.floats(0, 1), st.booleans()), max_size=12))
def test_any_other_layout_packs_as_the_text_or_not_at_all(
    parts: list[str], cuts: list[tuple[float, bool]]
) -> None:
    """Whatever a recording's line lays out (a hand-made cut, literal text where a block belongs),
    the entry is pack_text's or the layout is declined: never a third form."""
    text = "".join(parts)
    points = sorted({0, len(text), *(int(at * len(text)) for at, _ in cuts)})
    kinds = [kept for _, kept in cuts] + [True] * len(points)
    layout: list[str | tuple[str]] = [
        (text[a:b],) if kinds[i] else text[a:b] for i, (a, b) in enumerate(itertools.pairwise(points))
    ]
    laid = laid_text(layout, text, {})
    assert laid is None or laid == pack_text(text, {})
    assert laid_text(recording_layout(text), text + "!", {}) is None  # a layout of another text


def session(root: Path, recordings_dir: str = "recordings") -> LLMSession:
    return LLMSession(
        stage="judge",
        mode="replay",
        store=CallStore(root / "cache"),
        index=RecordingIndex(root / recordings_dir),
        recordings_dir=root / recordings_dir,
        identity=FAKE.identity,
        backend=lambda: FAKE,
    )


def recorded(tmp_path: Path, n: int = 6) -> tuple[list[ChatRequest], list[CallRecord]]:
    requests = [prompt(f"metric {i}", interview()) for i in range(n)]
    records = [record(r) for r in requests]
    stage_writer.write_stage(
        tmp_path / "recordings" / "judge", [RecordedCall(context=CONTEXT, record=r) for r in records]
    )
    return requests, records


def live_entries(tmp_path: Path, records: list[CallRecord]) -> dict[str, bytes | None]:
    live = CallStore(tmp_path / "live")
    for each in records:
        live.put(each)
    entries = {each.key: live.get_raw(each.key) for each in records}
    live.close()
    return entries


def seeded_entries(tmp_path: Path, records: list[CallRecord]) -> dict[str, bytes | None]:
    store = CallStore(tmp_path / "cache")
    entries = {each.key: store.get_raw(each.key) for each in records}
    assert all(store.get(each.key) == each for each in records)  # rebuilt from its blocks, verified
    store.close()
    return entries


def test_a_replay_seeds_from_the_recordings_blocks_the_bytes_a_live_call_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests, records = recorded(tmp_path)
    replay = session(tmp_path)

    def no_cut(*args: object) -> None:
        raise AssertionError("a seeded prompt was cut into blocks again")

    monkeypatch.setattr(cache_blocks, "pack_parts", no_cut)
    assert [replay.chat(r, CONTEXT).record for r in requests] == records
    replay.close(write_recording=False)
    monkeypatch.undo()
    assert seeded_entries(tmp_path, records) == live_entries(tmp_path, records)


def relaid(path: Path, lay: object) -> None:
    """Each call line of the recording rewritten with its messages laid out by `lay(text)`: the
    checksum (over the text) still holds."""
    blobs = stage_reader.split_recording(path.parent).blobs
    out = []
    for line in path.read_text().splitlines():
        entry = orjson.loads(line)
        if "blob" not in entry:
            for message in entry["request"]["messages"]:
                text = line_format.unpack_content(message["content"], blobs, "x")
                message["content"] = lay(text)  # type: ignore[operator]
            line = canonical_json(entry)
        out.append(line)
    path.write_text("\n".join(out) + "\n")


@pytest.mark.parametrize(
    "lay",
    [
        pytest.param(lambda text: text, id="one string"),
        pytest.param(lambda text: [text[: len(text) // 2], text[len(text) // 2 :]], id="two literals"),
    ],
)
def test_a_recording_cut_another_way_still_seeds_a_live_calls_bytes(tmp_path: Path, lay: object) -> None:
    requests, records = recorded(tmp_path)
    relaid(tmp_path / "recordings" / "judge" / stage_folders.CALLS_FILE, lay)
    replay = session(tmp_path)
    assert [replay.chat(r, CONTEXT).record for r in requests] == records  # it verifies: same text
    replay.close(write_recording=False)
    assert seeded_entries(tmp_path, records) == live_entries(tmp_path, records)


@pytest.mark.parametrize("renamed", [False, True], ids=["block edited", "block edited and renamed to match"])
def test_a_tampered_recording_block_is_not_seeded(tmp_path: Path, renamed: bool) -> None:
    requests, _ = recorded(tmp_path)
    path = tmp_path / "recordings" / "judge" / stage_folders.CALLS_FILE
    text = path.read_text()
    blob_at = text.index('\n{"blob":') + 1
    line_end = text.index("\n", blob_at)
    entry = orjson.loads(text[blob_at:line_end])
    old = entry["blob"]
    entry["text"] = entry["text"].replace("weekend", "weekday", 1)
    if renamed:  # the block hashes to its id, and the calls refer to it: their checksums then fail
        entry["blob"] = line_format.blob_id(entry["text"])
    text = text[:blob_at] + canonical_json(entry) + text[line_end:]
    path.write_text(text.replace(f'"blob":"{old}"', f'"blob":"{entry["blob"]}"'))
    replay = session(tmp_path)
    with pytest.raises(
        CorruptRecordError, match="does not hash to its id" if not renamed else "cannot be trusted"
    ):
        replay.chat(requests[0], CONTEXT)
    replay.close(write_recording=False)
    store = CallStore(tmp_path / "cache")
    assert len(store) == 0 and len(store.blocks.cache) == 0
    store.close()


def test_a_layout_is_taken_only_for_the_request_it_was_read_into() -> None:
    served = layouts.ServedLayouts()
    request = prompt("a", interview(20))
    twin = prompt("a", interview(20))  # equal, another object
    served.put(request, ["x"])
    assert served.take(twin) is None
    served.put(request, ["x"])
    assert served.take(request) == ["x"] and served.take(request) is None
    served.put(twin, ["y"])
    assert len(served) == 1
    del twin  # a layout never taken (a call read for the report) goes with its request
    gc.collect()
    assert len(served) == 0
    # A layout handed with another request's text is declined: the cache cuts that text itself.
    assert pack_laid(request, [recording_layout("You judge."), recording_layout(interview())]) is None
