"""A caller with no local cache keeps no layout of the calls it is served (issue 33): a dry run (the
progress line's prediction) asked StageIndex.call_with for every call, which cut each block's text
out of the caller's prompt for a seed no one would take (about 10-13 us a call). Served without it,
a call is checked the same, refused the same, and is the same call; a session with a store still
keeps the layout it seeds from."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.llm.cache.store import CallStore
from pipeline.llm.key_table import KeyTable
from pipeline.llm.recordings import layouts, line_format, stage_writer, verified_memo
from pipeline.llm.recordings.request_match import laid_out
from pipeline.llm.recordings.stage_index import index_stage
from pipeline.llm.records import RecordedCall
from pipeline.llm.session import LLMSession, RecordingIndex
from pipeline.llm.types import CallContext, ChatRequest, Message
from pipeline.tools.status.dry_results import KEPT, Kept
from pipeline.tools.status.probe import probe_stage
from tests.block_prompts import FAKE, interview, lines, prompt, record

CONTEXT = CallContext(stage="judge", item="1")
SLOW_OK = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


pytestmark = pytest.mark.usefixtures("fresh_memo")


def _requests(n: int = 5) -> list[ChatRequest]:
    return [prompt(f"metric {i}", interview()) for i in range(n)]


def _recorded(root: Path, requests: list[ChatRequest]) -> None:
    calls = [
        RecordedCall(context=CONTEXT.at(metric=str(i)), record=record(r)) for i, r in enumerate(requests)
    ]
    stage_writer.write_stage(root / "recordings" / "judge", calls)


def _copy(request: ChatRequest) -> ChatRequest:
    return ChatRequest.model_validate(request.model_dump(mode="json"))


class _Puts:
    """layouts.SERVED.put counted, by whether a store was there to take it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        put = layouts.SERVED.put

        def counted(request: ChatRequest, layout: list[object]) -> None:
            self.count += 1
            put(request, layout)  # type: ignore[arg-type]

        monkeypatch.setattr(layouts.SERVED, "put", counted)


def _session(root: Path, store: CallStore | None) -> LLMSession:
    return LLMSession(
        stage="judge",
        mode="replay",
        store=store,
        index=RecordingIndex(root / "recordings"),
        recordings_dir=root / "recordings",
        identity=FAKE.identity,
        backend=lambda: FAKE,
    )


def test_a_session_without_a_store_keeps_no_layout_one_with_a_store_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests = _requests()
    _recorded(tmp_path, requests)
    puts = _Puts(monkeypatch)
    bare = _session(tmp_path, None)
    served = [bare.chat(_copy(r), CONTEXT).record for r in requests]
    bare.close(write_recording=False)
    assert puts.count == 0  # nothing cut for a seed no one takes
    assert [r.request for r in served] == requests and all(r.verify() for r in served)
    verified_memo.forget_in_process()
    seeding = _session(tmp_path, CallStore(tmp_path / "cache"))
    assert [seeding.chat(_copy(r), CONTEXT).record for r in requests] == served
    seeding.close(write_recording=False)
    assert puts.count == len(requests)  # each one seeded from the recording's own blocks


def _ask_all(requests: list[ChatRequest]) -> object:
    def work(session: LLMSession) -> list[Kept]:
        for i, request in enumerate(requests):
            session.chat(_copy(request), CONTEXT.at(metric=str(i)))
        return [Kept("1", True)]

    return work


def test_a_dry_run_keeps_no_layout_and_predicts_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests = _requests()
    _recorded(tmp_path, requests)

    def predict() -> tuple[int, int, int]:
        probe = probe_stage(
            "judge",
            _ask_all(requests),  # type: ignore[arg-type]
            ["1"],
            KEPT,
            identity=FAKE.identity(),
            index=RecordingIndex(tmp_path / "recordings"),
            cache_dir=tmp_path / "no-cache",
            counted=KeyTable(),
        )
        return probe.calls, probe.recorded, len(probe.model_calls)

    puts = _Puts(monkeypatch)
    assert predict() == (len(requests), len(requests), 0)
    assert puts.count == 0


@pytest.mark.parametrize(
    "changed",
    [
        lambda r: r,
        lambda r: r.model_copy(update={"options": r.options.model_copy(update={"temperature": -0.0})}),
        lambda r: r.model_copy(update={"messages": (Message(role="user", content=r.messages[0].content),)}),
        lambda r: r.model_copy(update={"messages": (r.messages[0], Message(role="user", content="short"))}),
        lambda r: r.model_copy(
            update={
                "messages": (r.messages[0], Message(role="user", content=r.messages[1].content[1:] + "!"))
            }
        ),
        lambda r: r.model_copy(update={"messages": (*r.messages, Message(role="user", content="more"))}),
    ],
    ids=["as recorded", "options spelled otherwise", "another role", "another text", "shifted", "more"],
)
def test_served_without_a_seed_it_is_the_same_call_or_declined_alike(tmp_path: Path, changed: object) -> None:
    requests = _requests(2)
    _recorded(tmp_path, requests)
    index = index_stage(tmp_path / "recordings" / "judge")
    for request in requests:
        key = record(request).key
        asked = changed(_copy(request))  # type: ignore[operator]
        kept = index.call_with(index.at[key], key, asked)
        layouts.SERVED.take(asked)
        bare = index.call_with(index.at[key], key, asked, seed=False)
        assert bare == kept
        assert layouts.SERVED.take(asked) is None


class _Lengths:
    """The blocks' lengths, as LazyBlobs.length answers them (None: not a block of the recording)."""

    def __init__(self, blobs: dict[str, str]) -> None:
        self.blobs = blobs

    def length(self, blob: str) -> int | None:
        text = self.blobs.get(blob)
        return None if text is None else len(text)


@SLOW_OK
@given(lines, st.integers(0, 3), st.sampled_from(["user", "system"]), st.booleans())
def test_the_checks_decline_the_same_with_or_without_the_layout(
    parts: list[str], edit: int, role: str, unknown: bool
) -> None:
    """A line's messages laid over a caller's message: the same answer (lines up or not) whether the
    layout is kept, and a layout kept joins to the caller's text."""
    text = "".join(parts)
    blobs: dict[str, str] = {}
    written = [{"role": "user", "content": line_format.pack_content(text, blobs)}]
    content = [text, text + "x", text[1:], text[:-1] + "y" if text else "y"][edit]
    asked = ChatRequest(messages=(Message(role=role, content=content),))
    lengths = _Lengths(dict(list(blobs.items())[1:]) if unknown else blobs)  # a block it does not hold
    kept = laid_out(written, asked, lengths, keep=True)  # type: ignore[arg-type]
    bare = laid_out(written, asked, lengths, keep=False)  # type: ignore[arg-type]
    assert (kept is None) == (bare is None)
    if kept is not None:
        (laid,) = kept
        assert "".join(part if isinstance(part, str) else part[0] for part in laid) == content
