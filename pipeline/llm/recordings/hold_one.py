"""`judgeloop status`'s index: one stage's recording held at a time (RecordingIndex(hold_one=True)).

Status dry-runs every stage in turn (issue 33). Reading a stage's recording lets go of the one held
before, keeping its models and keys; a call another stage recorded is served from that stage read
again (a scan, once the memo holds it), not held.
"""

from __future__ import annotations

from pipeline.llm.recordings.lookup_order import LookupOrder
from pipeline.llm.recordings.recorded_models import RecordedModels
from pipeline.llm.recordings.stage_read import StagesRead
from pipeline.llm.records import CallRecord


class HoldOne:
    """RecordingIndex's hold_one bookkeeping, on the stages the index has read (`stages`), in the
    lookup's order (`lookup`), with the models' reader (`models`): a stage let go of, a lookup
    elsewhere holding none."""

    def __init__(self, stages: StagesRead, lookup: LookupOrder, models: RecordedModels) -> None:
        self._stages = stages
        self._lookup = lookup
        self._models = models

    def let_go(self) -> None:
        """(under the stages' lock) Every held stage's recording let go of, its models and keys
        noted; a damaged one stays, with its reason."""
        stages = self._stages
        for name, calls in list(stages.held.items()):
            if calls.error is None:
                stages.note(name, calls)
                del stages.held[name]
        stages.every_stage_held = False

    def elsewhere(self, key: str) -> CallRecord | None:
        """RecordingIndex.elsewhere, holding no other stage: a stage not read yet is read and noted,
        and the stage whose noted keys have the key is read again for its call and let go of."""
        stages, lookup = self._stages, self._lookup
        pinned_damaged = False
        for directory in lookup.stage_dirs():
            if pinned_damaged and lookup.unpinned(directory):
                return None  # as LookupOrder: no unpinned answer while a pinned recording is damaged
            with stages.lock:
                calls = stages.held.get(directory.name)
                keys = stages.noted_keys.get(directory.name)
            if calls is None and keys is None:
                self._models.models_of(directory, keep=False)
                with stages.lock:
                    calls = stages.held.get(directory.name)  # damaged: kept with its reason
                    keys = stages.noted_keys.get(directory.name)
            if calls is None and keys is not None and key in keys:
                calls = stages.read(directory)
            if calls is not None and (record := calls.get(key)) is not None:
                return record
            pinned_damaged |= calls is not None and calls.error is not None and not lookup.unpinned(directory)
        return None
