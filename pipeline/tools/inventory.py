"""What is stored where, read without side effects: the runs' summaries, the recordings line by
line, the local store entry by entry.

The pipeline writes all three (LLMSession.close, stage_writer.write_stage, CallStore.put); the
`judgeloop` commands read them here, so they keep no books of their own. Unlike
stage_reader.read_all, which stops a stage at its first untrusted call, the scan below reports every
bad line and goes on: a tool that checks or repairs must see all of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from pipeline.errors import JudgeloopError
from pipeline.experiments.params import Params
from pipeline.llm.bounds import depth_problem
from pipeline.llm.cache.safe_disk import ForeignKey
from pipeline.llm.cache.store import CallStore
from pipeline.llm.files import read_regular
from pipeline.llm.recordings import line_checks, stage_folders, stage_reader
from pipeline.llm.recordings.pins import Pins
from pipeline.llm.recordings.stage_index import index_stage
from pipeline.llm.recordings.verified_memo import VerifiedMemo
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.session import RUNS_DIR


@dataclass(frozen=True)
class RunSummary:
    """runs/<stage>.json as LLMSession.close writes it."""

    stage: str
    mode: str
    hits: int
    model_calls: int
    replay_misses: int
    keys: dict[str, str]  # key -> "hit" | "miss"


# A run summary lists every key of the stage's last run, about 50 bytes a call: 22 MB for the
# judge stage at a million calls, past the bound of one recording line (pipeline.llm.bounds
# .MAX_LINE_BYTES) that used to cap it (issue 33: gc failed there). This cap still refuses a file
# no run wrote: 256 MiB is about five million calls in one stage.
MAX_SUMMARY_BYTES = 256 << 20


def runs_dir(params: Params) -> Path:
    return Path(params.cache.dir).parent / RUNS_DIR


def read_runs(params: Params) -> dict[str, RunSummary]:
    runs: dict[str, RunSummary] = {}
    directory = runs_dir(params)
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            run = _summary(path)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise JudgeloopError(
                f"{path}: not a run summary ({exc}). Fix: delete it; the next run rewrites it."
            ) from exc
        runs[run.stage] = run
    return runs


def _summary(path: Path) -> RunSummary:
    """One summary, bounded and typed before use (pipeline.llm.bounds): orjson refuses a lone
    surrogate and nesting past 1,024 levels, where json raised RecursionError; every field has the
    type LLMSession.close writes, since the commands count and print them."""
    raw = orjson.loads(read_regular(path, MAX_SUMMARY_BYTES))  # never a pipe or /dev/zero
    if not isinstance(raw, dict):
        raise ValueError("not a JSON object")
    if (deep := depth_problem(raw)) is not None:
        raise ValueError(deep)
    if raw["stage"] != path.stem:  # a stage name read from a file may become a path (export)
        raise ValueError(f"it names stage {raw['stage']!r}, not {path.stem!r}")
    hits, model_calls, misses = counts = [raw[name] for name in ("hits", "model_calls", "replay_misses")]
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts):
        raise ValueError("hits, model_calls and replay_misses must be counts")
    keys = raw["keys"]
    if not isinstance(raw["mode"], str) or not isinstance(keys, dict):
        raise ValueError("mode must be text and keys a mapping")
    if not all(isinstance(key, str) and value in ("hit", "miss") for key, value in keys.items()):
        raise ValueError('every key must be marked "hit" or "miss"')
    return RunSummary(raw["stage"], raw["mode"], hits, model_calls, misses, keys)


def open_store(params: Params) -> CallStore | None:
    """The local store, or None when there is none (reading it must not create an empty one)."""
    directory = Path(params.cache.dir)
    return CallStore(directory) if directory.is_dir() else None


@dataclass
class Scan:
    """What a tolerant pass over recordings found: the calls that parse, and every problem."""

    calls: list[tuple[Path, int, RecordedCall]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    untrusted: set[tuple[Path, int]] = field(default_factory=set)  # the calls that do not verify

    def trusted(self) -> list[tuple[Path, int, RecordedCall]]:
        return [(path, line, call) for path, line, call in self.calls if (path, line) not in self.untrusted]


def recorded_calls(
    root: Path, problems: list[str], pins: Pins | None = None, untrusted: set[tuple[Path, int]] | None = None
) -> Iterator[tuple[Path, int, RecordedCall]]:
    """Like stage_reader.read_all, but appends each bad line (and each folder that is not a plain
    name, or does not match its pin in dvc.lock) to `problems` and goes on, instead of stopping at
    the first. Streams: one stage's recording is in memory at a time, and no call is kept, so a tool
    that only counts or collects keys stays small however many calls there are (issue 33). A call
    that does not verify is still yielded, and its (file, line) added to `untrusted` if given."""
    for directory in stage_folders.stage_dirs(root):
        yield from _stage_calls(root, directory, problems, pins, untrusted)


def _stage_calls(
    root: Path,
    directory: Path,
    problems: list[str],
    pins: Pins | None = None,
    untrusted: set[tuple[Path, int]] | None = None,
) -> Iterator[tuple[Path, int, RecordedCall]]:
    """recorded_calls of one stage folder."""
    try:
        stage_folders.stage_dir(root, directory.name)
    except JudgeloopError as exc:
        problems.append(f"{directory}: {exc.message}")
        return
    if pins is not None and (mismatch := pins.problem(directory)) is not None:
        problems.append(mismatch)
    try:
        parts = stage_reader.split_recording(directory)
    except JudgeloopError as exc:  # a symbolic link, a file too large or not UTF-8
        problems.append(exc.message)
        return
    problems += parts.problems
    for number, line in parts.calls:
        path, line_number = parts.located(number)  # the shard and its line, in a sharded recording
        where = f"{path}:{line_number}"
        try:
            call = line_checks.parse_call_line(line, parts.blobs, where)
        except JudgeloopError as exc:
            problems.append(exc.message)  # already names the file and line
            continue
        problem = call.record.problem()
        if problem is not None:
            problems.append(f"{where}: {call.context.describe()} key {call.record.key}: {problem}")
            if untrusted is not None:
                untrusted.add((path, line_number))
        else:
            call = call.current()  # under today's key recipe, as the pipeline reads it
        yield path, line_number, call


stage_calls = _stage_calls  # one stage's recorded_calls (cache verify, a stage it cannot stream)


def recorded_keys(root: Path, problems: list[str], memo: VerifiedMemo | None = None) -> set[str]:
    """The keys of every recorded call under `root`, as recorded_calls finds them, from each stage's
    verified lines (pipeline.llm.recordings.stage_index): a recording the memo says was verified in
    full before is scanned for its keys, not parsed (issue 33: gc at a million calls). A stage that cannot be
    trusted is read again tolerantly, each of its problems appended to `problems`."""
    keys: set[str] = set()
    for directory in stage_folders.stage_dirs(root):
        try:
            stage_folders.stage_dir(root, directory.name)
            keys |= index_stage(directory, memo=memo).at.keys()
        except JudgeloopError:
            keys |= {call.record.key for _, _, call in _stage_calls(root, directory, problems)}
    return keys


def scan_recordings(root: Path, pins: Pins | None = None) -> Scan:
    """Every call of recorded_calls, kept, and every problem."""
    scan = Scan()
    scan.calls = list(recorded_calls(root, scan.problems, pins, scan.untrusted))
    return scan


def local_records(store: CallStore) -> Iterator[tuple[str | ForeignKey, CallRecord | None, str | None]]:
    """(key, record or None, problem or None) for every local entry, foreign ones too: read as the
    store reads a hit (seal and key), then verified in full with its stored request (not a
    caller's), so an edited request shows too."""
    # A page of rows at a time, as stored (an item's calls together, and their blocks): a caller may
    # delete as it goes (verify --repair), which a live cursor over the database would not survive,
    # and the records, each with its 20 kB request, are not all held at once (issue 33).
    for key, record, problem in store.inspect_in_order():
        if record is not None:
            problem = record.problem()
        yield key, record, problem
