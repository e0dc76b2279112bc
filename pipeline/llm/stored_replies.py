"""Where a session finds a stored reply, and in which order (the base of pipeline.llm.session's
LLMSession): the stage's own recording first, then the local cache, then the other recordings, which
then seed the cache.

Nothing is served unverified: a local hit is checked against its seal and key (pipeline.llm.cache.store),
a recorded one was verified in full when its stage's recording was read, and that recording
matched its pin in dvc.lock (pipeline.llm.recordings.index, pipeline.llm.recordings.pins). A damaged entry
stops the stage with an error naming the stage, item, key and the fix. The stage's own recording
comes before the local cache (in auto mode as in replay), so what a cache folder holds (someone
else's, say) cannot change what a locked recording replays or reruns.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.errors import CorruptRecordError
from pipeline.llm.blocks import Laid
from pipeline.llm.cache.store import CallStore
from pipeline.llm.recent import RECENT, Recent
from pipeline.llm.recordings import layouts
from pipeline.llm.recordings.index import RecordingIndex
from pipeline.llm.recordings.stage_index import StageIndex
from pipeline.llm.records import CallRecord
from pipeline.llm.settings import CacheMode
from pipeline.llm.types import ChatRequest


class StoredReplies:
    """A stage's stored replies, looked up verified, and the local cache seeded with the recorded."""

    def __init__(
        self,
        *,
        stage: str,
        mode: CacheMode,
        store: CallStore | None,
        index: RecordingIndex,
        recordings_dir: Path,
    ) -> None:
        self.stage, self.mode, self.store, self.index = stage, mode, store, index
        self.recordings_dir = recordings_dir
        self._served: Recent[CallRecord] = Recent(RECENT)  # looked up and verified, in this session

    def lookup(self, key: str, request: ChatRequest | None = None) -> CallRecord | None:
        """A stored reply, verified: the stage's own recording first, then the local cache, then
        the other recordings (which then seed the cache). The stage's recording is the experiment's
        truth (pinned in dvc.lock): a local entry with another reply for a call it holds is never
        served, in auto mode either (`judgeloop cache verify` names it, and how to drop it). A key
        served once in this session is served again from memory, as verified then (a loop repeats
        its prompts)."""
        record = self._served.get(key)
        if record is None:
            record = self._stored(key, request)
            if record is not None:
                self._served.put(key, record)
        return record

    def served_checksum(self, key: str) -> str | None:
        """The checksum of the record `lookup(key)` would serve, where that is one served already or
        the line of the stage's own recording (which `lookup` asks first in auto and replay mode):
        that line read back against its digest and parsed as JSON, its request not rebuilt from its
        blocks (issue 33: a stage adopting its dry run asks this of every call before serving any).
        None where only `lookup` can say. Raises CorruptRecordError as `lookup` does."""
        record = self._served.get(key)
        if record is not None:
            return record.checksum
        if self.mode not in ("auto", "replay"):
            return None
        return self.index.own_checksum(key, self.stage)

    def _stored(self, key: str, request: ChatRequest | None) -> CallRecord | None:
        if self.mode in ("auto", "replay"):
            record = self.index.own(key, self.stage, request, seed=self.store is not None)
            if record is not None:
                self._seed(record)
                return record
        if self.store is not None:
            record = self.store.get(key, request)
            if record is not None:
                return record
        record = self.index.lookup(key, self.stage)
        if record is not None:
            self._seed(record)
        return record

    def _seed(self, record: CallRecord) -> None:
        # Written in batches, not a write a call (pipeline.llm.cache.store), from the recording's own
        # blocks where its line was just parsed (pipeline.llm.recordings.layouts).
        layout = layouts.SERVED.take(record.request)
        if self.store is not None:
            self.store.seed(record, layout)

    def _seed_of(self, key: str) -> tuple[CallRecord, list[Laid] | None]:
        """The record of `key` from the stage's own recording and its layout, as `_stored` seeds it."""
        record = self.index.own(key, self.stage)
        if record is None:  # served from that recording, so there unless read anew since
            raise CorruptRecordError(f"stage {self.stage}: the call {key} it served is no longer recorded")
        return record, layouts.SERVED.take(record.request)

    def _own_recording(self) -> StageIndex | None:
        """The stage's own recording as read for this run, where this session writes it."""
        return self.index.read_already(self.stage) if self.index.root == self.recordings_dir else None
