"""What is stored where, read without side effects: the runs' summaries, the recordings line by
line, the local store entry by entry.

The pipeline writes all three (LLMSession.close, recordings.write_stage, CallStore.put); the
`judgeloop` commands read them here, so they keep no books of their own. Unlike
recordings.read_all, which stops a stage at its first untrusted call, the scan below reports every
bad line and goes on: a tool that checks or repairs must see all of them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.errors import CorruptRecordError, JudgeloopError
from pipeline.experiments.params import Params
from pipeline.llm import recordings
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.session import RUNS_DIR
from pipeline.llm.store import CallStore


@dataclass(frozen=True)
class RunSummary:
    """runs/<stage>.json as LLMSession.close writes it."""

    stage: str
    mode: str
    hits: int
    model_calls: int
    replay_misses: int
    keys: dict[str, str]  # key -> "hit" | "miss"


def runs_dir(params: Params) -> Path:
    return Path(params.cache.dir).parent / RUNS_DIR


def read_runs(params: Params) -> dict[str, RunSummary]:
    runs: dict[str, RunSummary] = {}
    directory = runs_dir(params)
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            runs[raw["stage"]] = RunSummary(
                raw["stage"], raw["mode"], raw["hits"], raw["model_calls"], raw["replay_misses"], raw["keys"]
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise JudgeloopError(
                f"{path}: not a run summary ({exc}). Fix: delete it; the next run rewrites it."
            ) from exc
    return runs


def open_store(params: Params) -> CallStore | None:
    """The local store, or None when there is none (reading it must not create an empty one)."""
    directory = Path(params.cache.dir)
    return CallStore(directory) if directory.is_dir() else None


@dataclass
class Scan:
    """What a tolerant pass over recordings found: the calls that parse, and every problem."""

    calls: list[tuple[Path, int, RecordedCall]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def scan_recordings(root: Path) -> Scan:
    """Like recordings.read_all, but reports each bad line and goes on, instead of stopping at the first."""
    scan = Scan()
    for directory in recordings.stage_dirs(root):
        blobs: dict[str, str] = {}
        blobs_path = directory / recordings.BLOBS_FILE
        lines = blobs_path.read_text(encoding="utf-8").splitlines() if blobs_path.exists() else []
        for number, line in enumerate(lines, start=1):
            try:
                entry = json.loads(line)
                blob, text = str(entry["blob"]), str(entry["text"])
            except (ValueError, KeyError, TypeError) as exc:
                scan.problems.append(f"{blobs_path}:{number}: not a blob line ({exc})")
                continue
            blobs[blob] = text
            # A call that uses an edited blob fails record.problem() below, as a request edited.
            if recordings.blob_id(text) != blob:
                scan.problems.append(f"{blobs_path}:{number}: blob {blob} does not hash to its id (edited)")
        calls_path = directory / recordings.CALLS_FILE
        for number, line in enumerate(calls_path.read_text(encoding="utf-8").splitlines(), start=1):
            where = f"{calls_path}:{number}"
            try:
                call = recordings.parse_call_line(line, blobs, where)
            except JudgeloopError as exc:
                scan.problems.append(exc.message)  # already names the file and line
                continue
            problem = call.record.problem()
            if problem is not None:
                scan.problems.append(f"{where}: {call.context.describe()} key {call.record.key}: {problem}")
            else:
                call = call.current()  # under today's key recipe, as the pipeline reads it
            scan.calls.append((calls_path, number, call))
    return scan


def local_records(store: CallStore) -> Iterator[tuple[str, CallRecord | None, str | None]]:
    """(key, record or None, problem or None) for every local entry, read as the store reads it
    but with its stored request (not the caller's), so an edited request shows."""
    for key in store.keys():  # noqa: SIM118 (a CallStore is not iterable)
        try:
            record = store.get(key)
        except CorruptRecordError as exc:
            yield key, None, f"cannot be read ({exc.message.splitlines()[0]})"
            continue
        if record is None:  # deleted by another process since keys() listed it
            continue
        if record.key != key:
            yield key, record, f"foreign: stored under {key} but the record is for {record.key}"
        else:
            yield key, record, record.problem()
