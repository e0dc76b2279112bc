"""Merge a collaborator's recordings into ours: the union of the calls, and every conflict named.

A call is (context, key). The same key in the same context is one call whichever side made it.
The same key answered with a different reply (text or done_reason) on each side is a conflict:
two runs of "the same" request disagreed, which a silent pick would hide. Replies that differ only
in metadata (when, how long, token counts) are the same answer twice, not a conflict.

One key keeps one record in the result: ours, or theirs for a conflict settled with `theirs`, so
that replaying the merged recordings cannot depend on which stage's copy is read first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pipeline.data.recorded_calls import first_by_key
from pipeline.llm.recordings import stage_folders, stage_reader, stage_writer
from pipeline.llm.records import RecordedCall

Prefer = Literal["ours", "theirs"]


@dataclass(frozen=True)
class Conflict:
    key: str
    ours: RecordedCall
    theirs: RecordedCall


@dataclass
class StageMerge:
    stage: str
    ours: int
    added: int
    calls: list[RecordedCall] = field(default_factory=list)


@dataclass
class MergeResult:
    stages: list[StageMerge]
    conflicts: list[Conflict]
    took_theirs: int


def read_stages(root: Path) -> dict[str, list[RecordedCall]]:
    # verify=True: a record that cannot be trusted must not travel into someone else's recordings.
    # Each folder's name is checked: it names the folder written on our side.
    return {
        d.name: [lc.call for lc in stage_reader.read_stage(stage_folders.stage_dir(root, d.name))]
        for d in stage_folders.stage_dirs(root)
    }


def _first_records(stages: Mapping[str, list[RecordedCall]]) -> dict[str, RecordedCall]:
    # The first by stage then context, the copy RecordingIndex (which a session replays from) keeps.
    return first_by_key(call for stage in sorted(stages) for call in stages[stage])


def _differ(a: RecordedCall, b: RecordedCall) -> bool:
    ra, rb = a.record.reply, b.record.reply
    return (ra.text, ra.done_reason) != (rb.text, rb.done_reason)


def merge_calls(
    ours: Mapping[str, list[RecordedCall]], theirs: Mapping[str, list[RecordedCall]], prefer: Prefer = "ours"
) -> MergeResult:
    our_first, their_first = _first_records(ours), _first_records(theirs)
    conflicts = [
        Conflict(key, our_first[key], their_first[key])
        for key in sorted(our_first.keys() & their_first.keys())
        if _differ(our_first[key], their_first[key])
    ]
    chosen = {key: call.record for key, call in their_first.items()}
    chosen.update({key: call.record for key, call in our_first.items()})
    if prefer == "theirs":
        chosen.update({c.key: c.theirs.record for c in conflicts})
    stages: list[StageMerge] = []
    for stage in sorted(ours.keys() | theirs.keys()):
        merged: dict[tuple[Any, ...], RecordedCall] = {}
        for call in ours.get(stage, []):
            merged[(*call.context.sort_key(), call.record.key)] = call
        mine = len(merged)
        for call in theirs.get(stage, []):
            merged.setdefault((*call.context.sort_key(), call.record.key), call)
        calls = [replace(c, record=chosen[c.record.key]) for c in merged.values()]
        stages.append(StageMerge(stage, mine, len(merged) - mine, calls))
    took = len(conflicts) if prefer == "theirs" else 0
    return MergeResult(stages, conflicts, took)


def merge_into(target: Path, other: Path, prefer: Prefer = "ours") -> MergeResult:
    """Merge `other` into `target` and write every stage back (sorted, so the bytes are deterministic)."""
    result = merge_calls(read_stages(target), read_stages(other), prefer)
    for stage in result.stages:
        stage_writer.write_stage(stage_folders.stage_dir(target, stage.stage), stage.calls)
    return result
