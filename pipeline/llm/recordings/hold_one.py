"""`judgeloop status`'s index: one stage's recording held at a time (RecordingIndex(hold_one=True)).

Status dry-runs every stage in turn (issue 33). Reading a stage's recording lets go of the one held
before, keeping its models and keys; a call another stage recorded is served from that stage read
again (a scan, once the memo holds it), not held.
"""

from __future__ import annotations

from pipeline.llm.recordings.lookup_order import LookupOrder
from pipeline.llm.recordings.recorded_models import RecordedModels
from pipeline.llm.records import CallRecord


class HoldOne(LookupOrder, RecordedModels):
    """RecordingIndex's hold_one bookkeeping: a stage let go of, a lookup elsewhere holding none."""

    def _let_go(self) -> None:
        """(hold_one, under the lock) Every held stage's recording let go of, its models and keys
        noted; a damaged one stays, with its reason."""
        for name, calls in list(self._stages.items()):
            if calls.error is None:
                self._note(name, calls)
                del self._stages[name]
        self._every_stage_read = False

    def _elsewhere_unheld(self, key: str) -> CallRecord | None:
        """(hold_one) elsewhere, holding no other stage: a stage not read yet is read and noted, and
        the stage whose noted keys have the key is read again for its call and let go of."""
        pinned_damaged = False
        for directory in self._stage_dirs():
            if pinned_damaged and self._unpinned(directory):
                return None  # as _answering: no unpinned answer while a pinned recording is damaged
            with self._lock:
                calls = self._stages.get(directory.name)
                keys = self._noted_keys.get(directory.name)
            if calls is None and keys is None:
                self._models_of(directory, keep=False)
                with self._lock:
                    calls = self._stages.get(directory.name)  # damaged: kept with its reason
                    keys = self._noted_keys.get(directory.name)
            if calls is None and keys is not None and key in keys:
                calls = self._read(directory)
            if calls is not None and (record := calls.get(key)) is not None:
                return record
            pinned_damaged |= calls is not None and calls.error is not None and not self._unpinned(directory)
        return None
