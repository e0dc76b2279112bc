"""Recorded calls by key: how a report or a tool finds the call a result names (its call_keys).

The one reader of "records by key" outside the session (pipeline.llm.session.RecordingIndex, the
cache's own, keeps the same rule): a key recorded more than once, in two stages or twice in one,
is its first copy, by stage name then line, the copy a replay is served.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pipeline.llm import recordings
from pipeline.llm.records import RecordedCall


def first_by_key(calls: Iterable[RecordedCall]) -> dict[str, RecordedCall]:
    """Each key's first call among `calls`."""
    by_key: dict[str, RecordedCall] = {}
    for call in calls:
        by_key.setdefault(call.record.key, call)
    return by_key


def recorded_calls(path: Path, *, verify: bool = True) -> dict[str, RecordedCall]:
    """Every call recorded under `path` by key: `path` is a recordings folder (every stage in it)
    or one stage's folder; nothing recorded there, none. verify=True: a record whose checksum fails
    stops the read (recordings.read_stage says how to fix it); verify=False reads it as it is."""
    stages = [path] if (path / recordings.CALLS_FILE).is_file() else recordings.stage_dirs(path)
    return first_by_key(
        loaded.call for stage in stages for loaded in recordings.read_stage(stage, verify=verify)
    )
