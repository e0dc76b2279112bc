"""A replayed call served with less work (issue 33, branch replay-speed), the same call as before:

- served to a caller that holds the request its key came from, a recorded line's request is not
  rebuilt from its blocks (StageIndex.call_with): the record is the one a full parse gives, and so
  is the layout the local cache is seeded from; where the caller's request differs in what the key
  spells loosely, the line is parsed whole;
- a stage's recording read only for the model's identity, once the memo holds it as verified, is
  hashed and its models read, its lines not placed (folder_scan.verified_models); anything a full
  read would refuse is still refused by the full read."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline.errors import CorruptRecordError
from pipeline.llm.cache.blocks import pack_laid
from pipeline.llm.recordings import layouts, stage_folders, stage_writer, verified_memo
from pipeline.llm.recordings.folder_scan import verified_models
from pipeline.llm.recordings.index import RecordingIndex
from pipeline.llm.recordings.stage_index import StageIndex, index_stage
from pipeline.llm.recordings.verified_memo import IN_PROCESS
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import ChatRequest, Message
from tests.test_recordings import _calls

pytestmark = pytest.mark.usefixtures("fresh_memo")


def _stage(root: Path, n: int = 6) -> tuple[Path, list[RecordedCall]]:
    calls = _calls(n)
    directory = root / "judge"
    stage_writer.write_stage(directory, calls)
    return directory, calls


def _copy(request: ChatRequest) -> ChatRequest:
    """An equal request that is another object, as a replayed stage builds it anew."""
    return ChatRequest.model_validate(request.model_dump(mode="json"))


def test_a_call_served_with_its_request_is_the_call_a_full_parse_serves(tmp_path: Path) -> None:
    directory, calls = _stage(tmp_path)
    index = index_stage(directory)
    for call in calls:
        key, asked = call.record.key, _copy(call.record.request)
        found = index.at[key]
        full = index.call_at(found)
        full_layout = layouts.SERVED.take(full.record.request)
        served = index.call_with(found, key, asked)
        assert served is not None
        assert served.record.request is asked  # the caller's, not rebuilt from the blocks
        assert served == full and served.record.verify()
        layout = layouts.SERVED.take(asked)
        assert layout is not None and full_layout is not None
        assert layout == full_layout and len(full_layout) == 1
        assert isinstance(layout[0], list) and any(isinstance(part, tuple) for part in layout[0])
        # The local cache's entry is the same bytes either way.
        assert pack_laid(asked, layout) == pack_laid(full.record.request, full_layout)
        assert index.call(key, asked) == full


def test_no_block_is_read_back_when_the_caller_holds_the_request(tmp_path: Path) -> None:
    directory, calls = _stage(tmp_path)
    index = index_stage(directory)
    index.blobs.clear_cache()
    for call in calls:
        assert index.call(call.record.key, _copy(call.record.request)) is not None
    assert dict.__len__(index.blobs) == 0  # nothing read into the blocks' cache
    index.call(calls[0].record.key)  # without the request: parsed whole, its blocks read
    assert dict.__len__(index.blobs) > 0


@pytest.mark.parametrize(
    "changed",
    [
        lambda r: r.model_copy(update={"options": r.options.model_copy(update={"temperature": -0.0})}),
        lambda r: r.model_copy(update={"messages": (Message(role="system", content=r.messages[0].content),)}),
        lambda r: r.model_copy(
            update={"messages": (Message(role="user", content=r.messages[0].content + "!"),)}
        ),
        lambda r: r.model_copy(update={"messages": (*r.messages, Message(role="user", content="more"))}),
    ],
    ids=["options spelled otherwise", "another role", "another text", "another message"],
)
def test_a_request_that_is_not_the_lines_is_never_served_as_it(tmp_path: Path, changed: object) -> None:
    """Whatever the caller holds, the record served is the recorded one: a request the line's
    layout does not fit (or whose fields are written otherwise) falls back to the full parse."""
    directory, calls = _stage(tmp_path)
    index = index_stage(directory)
    call = calls[1]
    assert call.record.request.options.temperature == 0.0
    other = changed(call.record.request)  # type: ignore[operator]
    found = index.at[call.record.key]
    assert index.call_with(found, call.record.key, other) is None
    served = index.call(call.record.key, other)
    assert served is not None and served.record == call.record and served.record.request is not other


def test_a_line_under_another_key_is_not_served_with_the_request(tmp_path: Path) -> None:
    directory, calls = _stage(tmp_path)
    index = index_stage(directory)
    wanted, other = calls[3].record, calls[2].record
    assert index.call_with(index.at[other.key], wanted.key, wanted.request) is None
    at = dict(index.at)
    at[wanted.key] = at[other.key]  # a place that names another line, however it came to
    misplaced = StageIndex(index.lines, index.blobs, at, index.models)
    with pytest.raises(CorruptRecordError, match="as the recording's index placed it"):
        misplaced.call(wanted.key, wanted.request)


def _without_request(own: Callable[..., CallRecord | None]) -> Callable[..., CallRecord | None]:
    """RecordingIndex.own as before call_with: never handed the request."""
    return lambda key, stage, request=None, seed=True: own(key, stage)


def test_a_session_replays_the_same_calls_and_seeds_the_same_cache(tmp_path: Path) -> None:
    """End to end through a session: every call served from the recording (with the request), and
    the local cache seeded from the layout cut from the caller's text is the cache a full parse
    seeds, entry for entry."""
    from tests.helpers import make_session

    calls = _calls(6)
    caches = []
    for with_request in (True, False):
        verified_memo.forget_in_process()
        root = tmp_path / f"run-{with_request}"
        (root / "recordings").mkdir(parents=True)
        stage_writer.write_stage(root / "recordings" / "judge", calls)
        session, backend = make_session(root, "replay")
        if not with_request:
            session.index.own = _without_request(session.index.own)  # type: ignore[method-assign]
        for call in calls:
            served = session.chat(_copy(call.record.request), call.context)
            assert served.cache_hit and served.record == call.record
        assert backend.calls == []
        store = session.store
        assert store is not None
        store.flush()
        caches.append({key: store.get_raw(key) for key in sorted(c.record.key for c in calls)})
        caches.append(
            {
                ident: store.blocks.cache.get(ident)
                for ident in sorted(map(str, store.blocks.cache.iterkeys()))
            }
        )
        session.close(write_recording=False)
    assert caches[0] == caches[2] and all(caches[0].values())
    assert caches[1] == caches[3] and caches[1]


def test_a_verified_recording_gives_its_models_without_placing_its_lines(tmp_path: Path) -> None:
    directory, calls = _stage(tmp_path)
    assert verified_models(directory, None, IN_PROCESS) is None  # not verified yet: read in full
    full = index_stage(directory)  # verified, remembered
    assert verified_models(directory, None, IN_PROCESS) == full.models
    index = RecordingIndex(tmp_path)
    model = calls[0].record.model
    assert index.identities("fake", model.name, hold_only="assess") == {model}
    assert "judge" not in index._stages.held and index._stages.noted["judge"] == {model}


@pytest.mark.parametrize("damage", ["stray", "edited"])
def test_what_a_full_read_refuses_is_refused_after_the_memo_holds_it(tmp_path: Path, damage: str) -> None:
    directory, calls = _stage(tmp_path)
    index_stage(directory)
    if damage == "stray":
        (directory / "calls-0-0000000000000000.jsonl").write_text("{}\n", encoding="utf-8")
    else:
        path = directory / stage_folders.CALLS_FILE
        path.write_bytes(path.read_bytes().replace(b'"created_at":"2', b'"created_at":"3', 1))
    assert verified_models(directory, None, IN_PROCESS) is None
    index = RecordingIndex(tmp_path)
    with pytest.raises(CorruptRecordError):
        index.own(calls[0].record.key, "judge")
    assert index.identities("fake", calls[0].record.model.name, hold_only="assess") == set()
    assert index.damaged()
