"""(a) A cache hit through judgeloop's layer vs a raw diskcache get of the same record.

judgeloop's hit = derive the key from the request (canonical JSON, XXH3-128), read the record,
verify it (the seal, sha256 of the stored header, and the key it names: pipeline.llm.cache.store), parse
and validate its header, log the call. The raw get = diskcache.Cache.get(key) of the same stored
bytes, key already known. "verified read" is the store's part alone (read, seal, key, header),
given the key; "recording" is what writing the stage's recording then costs per call it holds (a
hit's line is made when the stage is written, not on the hit: pipeline.llm.recordings.stage_writer), unless
the session is also waiting on its model: the session timed here answered every call first, so its
hits pack their lines as they come. "rerun hit" is a fresh session's hit, as a rerun's stage
process has: every call found in the local cache, its line made when the stage is written.

Each call's request is built just before it is timed, as a stage builds a prompt and asks at
once: a fresh string (CPython caches a string's UTF-8 form once something has encoded it, so a
reused request would hide the cost of hashing it), and in the CPU cache as a just-built prompt is.
The session keeps every call it served, as a stage does, so the garbage collector's work counts.

Shown for judge calls around a 2 kB and a 20 kB transcript; the target (<= 3x) is on the 20 kB one.

    .venv/bin/python bench/cache_overhead.py
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import judge_request, transcript
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.keys import request_key
from pipeline.llm.types import CallContext
from pipeline.testing.sessions import folder_session

N = 400
ROUNDS = 9


def rerun_hits(root: Path, text: str, fake: FakeBackend) -> float:
    """Per-call microseconds (median of rounds) of a hit in a rerun: a fresh session (as a stage's
    process is) whose every call is found in the local cache, so its recording's lines are made when
    the stage is written, not on the hit (pipeline.llm.served_calls, ServedCalls._log)."""
    per_round = []
    for _ in range(ROUNDS):
        session = folder_session(root, fake)
        context = CallContext(stage="judge", item="1")
        spent = 0.0
        for i in range(N):
            request = judge_request(i, text)
            start = time.perf_counter()
            session.chat(request, context)
            spent += time.perf_counter() - start
        per_round.append(spent / N)
        session.close(write_recording=False)
    return statistics.median(per_round) * 1e6


def measure(root: Path, chars: int) -> tuple[float, float, float, float, float, float, float, float, int]:
    """Per-call microseconds (median of rounds): a rerun's hit (rerun_hits), then, in the session
    that made the calls: judgeloop hit, raw get, key alone, verified read;
    the medians of the rounds' ratios (hit / raw get and verified read / raw get, timed call by call
    side by side, so a slow spell of the machine weighs on both); the recording's cost per hit;
    and the record's size."""
    text = transcript(chars)
    fake = FakeBackend(lambda r: "Explanation: fine.\nScore: 4")
    session = folder_session(root, fake)
    context = CallContext(stage="judge", item="1")
    keys = [session.chat(judge_request(i, text), context).record.key for i in range(N)]
    assert session.store is not None
    raw_cache = session.store._cache  # the diskcache.Cache underneath, for the raw baseline
    identity = fake.identity()
    store = session.store
    ours, raw, key, read, ratio, read_ratio = [], [], [], [], [], []
    for _ in range(ROUNDS):
        spent = {"ours": 0.0, "raw": 0.0, "key": 0.0, "read": 0.0}
        for i in range(N):
            request = judge_request(i, text)
            start = time.perf_counter()
            session.chat(request, context)
            spent["ours"] += time.perf_counter() - start
            request = judge_request(i, text)  # the same cache state for the baseline
            start = time.perf_counter()
            raw_cache.get(keys[i])
            spent["raw"] += time.perf_counter() - start
            request = judge_request(i, text)
            start = time.perf_counter()
            request_key(identity, request)
            spent["key"] += time.perf_counter() - start
            request = judge_request(i, text)
            start = time.perf_counter()
            store.get(keys[i], request)
            spent["read"] += time.perf_counter() - start
        ours.append(spent["ours"] / N)
        raw.append(spent["raw"] / N)
        key.append(spent["key"] / N)
        read.append(spent["read"] / N)
        ratio.append(spent["ours"] / spent["raw"])
        read_ratio.append(spent["read"] / spent["raw"])
    assert len(fake.calls) == N, "every timed call must have been a hit"
    rerun = rerun_hits(root, text, fake)
    size = len(raw_cache.get(keys[0]))
    lines = len({(*c.context.sort_key(), c.key) for c in session.served})
    start = time.perf_counter()
    session.recording.write(root / "recordings" / "judge")
    recording = (time.perf_counter() - start) / lines  # a rerun's hits are each a line of their own
    session.close(write_recording=False)
    us = [statistics.median(x) * 1e6 for x in (ours, raw, key, read)]
    return (
        rerun,
        us[0],
        us[1],
        us[2],
        us[3],
        statistics.median(ratio),
        statistics.median(read_ratio),
        recording * 1e6,
        size,
    )


def main() -> None:
    print(f"{N} hits x {ROUNDS} rounds (median of rounds), a fresh request per call")
    columns = ["transcript", "record", "rerun hit", "judgeloop hit", "raw get", "ratio", "key alone"]
    columns += ["verified read", "read ratio", "recording"]
    print("  ".join(f"{c:>13}" for c in columns))
    for chars in (2_000, 20_000):
        with tempfile.TemporaryDirectory() as tmp:
            rerun, ours, raw, key, read, ratio, read_ratio, recording, size = measure(Path(tmp), chars)
        cells = (
            f"{chars} chars",
            f"{size} B",
            f"{rerun:.1f} us",
            f"{ours:.1f} us",
            f"{raw:.1f} us",
            f"{ratio:.2f}x",
            f"{key:.1f} us",
            f"{read:.1f} us",
            f"{read_ratio:.2f}x",
            f"{recording:.1f} us",
        )
        print("  ".join(f"{c:>13}" for c in cells))
    print("target: ratio <= 3x on the 20 kB transcript")
    print("record: the stored entry (its blocks apart); rerun hit: a fresh session's hit, all from the cache")


if __name__ == "__main__":
    main()
