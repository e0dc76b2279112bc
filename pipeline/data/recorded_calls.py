"""Recorded calls by key: how a report or a tool finds the call a result names (its call_keys).

The one reader of "records by key" outside the session (pipeline.llm.session.RecordingIndex, the
cache's own, keeps the same rule): a key recorded more than once, in two stages or twice in one,
is its first copy, by stage name then line, the copy a replay is served.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from pathlib import Path

from pipeline.llm.recordings import stage_folders, stage_reader
from pipeline.llm.recordings.verified_memo import VerifiedMemo
from pipeline.llm.records import RecordedCall
from pipeline.llm.types import PROMPT_TOO_LONG, CallContext


def first_by_key(calls: Iterable[RecordedCall]) -> dict[str, RecordedCall]:
    """Each key's first call among `calls`."""
    by_key: dict[str, RecordedCall] = {}
    for call in calls:
        by_key.setdefault(call.record.key, call)
    return by_key


def recorded_calls(
    path: Path, *, verify: bool = True, stages: Iterable[str] | None = None
) -> dict[str, RecordedCall]:
    """Every call recorded under `path` by key: `path` is a recordings folder (every stage in it,
    or only the folders of `stages`: a report reads its own stages' recordings, never a folder no
    stage owns) or one stage's folder; nothing recorded there, none. verify=True: a record whose
    checksum fails stops the read (stage_reader.read_stage says how to fix it); verify=False reads it
    as it is."""
    if (path / stage_folders.CALLS_FILE).is_file():
        folders = [path]
    elif stages is not None:
        folders = [d for d in map(partial(stage_folders.stage_dir, path), sorted(stages)) if d.is_dir()]
    else:
        folders = stage_folders.stage_dirs(path)
    return first_by_key(
        loaded.call for stage in folders for loaded in stage_reader.read_stage(stage, verify=verify)
    )


def call_counts(calls: Iterable[RecordedCall]) -> dict[str, int]:
    """What a stage's recorded calls add up to, as `judgeloop audit --stage` shows them one by one:

        calls             every recorded call
        reasks            calls that re-ask an earlier question (their context's attempt > 0)
        reasked           questions asked again at least once (a context but its attempt: an item's
                          metric, a candidate's criterion, ...), whatever the last reply gave
        cut_at_num_predict  replies cut at the token limit (done_reason "length")
        too_long          prompts refused as too long for the context window (llm.too_long)

    The metrics of every design count from here, so that each number can be checked against the
    calls an auditor reads (tests/test_metrics_counts.py)."""
    return counted_calls((call.context, call.record.reply.done_reason) for call in calls)


def counted_calls(calls: Iterable[tuple[CallContext, str | None]]) -> dict[str, int]:
    """call_counts from each call's context and its reply's done_reason, all that it counts: a
    reader that holds a call's line need not unpack its prompts to count it."""
    counts = {"calls": 0, "reasks": 0, "reasked": 0, "cut_at_num_predict": 0, "too_long": 0}
    asked_again: set[tuple[object, ...]] = set()
    for context, done_reason in calls:
        counts["calls"] += 1
        if context.attempt > 0:
            counts["reasks"] += 1
            asked_again.add(context.at(attempt=0).sort_key())
        counts["cut_at_num_predict"] += done_reason == "length"
        counts["too_long"] += done_reason == PROMPT_TOO_LONG
    counts["reasked"] = len(asked_again)
    return counts


def stage_call_counts(recordings_dir: Path, stages: Iterable[str]) -> dict[str, dict[str, int]]:
    """call_counts of each stage's recording under `recordings_dir` (none recorded: all zero)."""
    return {
        stage: call_counts(
            loaded.call for loaded in stage_reader.read_stage(stage_folders.stage_dir(recordings_dir, stage))
        )
        for stage in sorted(stages)
    }


def stage_calls(
    recordings_dir: Path, stages: Iterable[str], memo: VerifiedMemo | None = None
) -> dict[str, list[RecordedCall]]:
    """Each of `stages`' recorded calls under `recordings_dir` (verified, in order; nothing
    recorded: none), read once for a report that counts them (call_counts), names their model
    (pipeline.data.recorded_models.count_models) and shows them by key (first_by_key), rather than
    parsed once for each. `memo`: content verified in full before, as the stages remember it
    (pipeline.llm.recordings.verified_memo), is not verified again; any other is, in full."""
    return {
        stage: [
            loaded.call
            for loaded in stage_reader.read_stage(stage_folders.stage_dir(recordings_dir, stage), memo=memo)
        ]
        for stage in sorted(set(stages))
    }
