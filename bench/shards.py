"""One stage's recording of N judge calls, in one file and in shards (issue 33, proposal 3).

    nice -n 19 .venv/bin/python bench/shards.py --calls 10000

N calls on the fake backend, a 20 kB transcript of its own for every ten (bench.common's, each line
naming its interview, so that interviews share no block), written as one stage's
recording with shards.SHARD_AT above N (one file) and as it is (shards past 4,096 calls). For each
layout, each step in a process of its own (CPU user+sys and peak RSS from wait4): write the stage,
read it whole and verified (index_stage, what a session or status does), read one call
(key_reader.read_keys, what a reader of one key does), then a rerun that changes one call (its
interview's text, the others as recorded: every record made at one time, as a rerun's cache hits
keep theirs): the bytes rewritten (files whose content changed) and the bytes on disk.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STEP = r"""
import sys, time
from pathlib import Path
from bench.common import judge_request, transcript
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.recordings import key_reader, shards, stage_writer
from pipeline.llm.recordings.stage_index import index_stage
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import CallContext
step, layout, calls, directory = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
if layout == "one-file":
    shards.SHARD_AT = 10**9
fake = FakeBackend()
TEXT = transcript()
def call(i, salt=""):
    req = judge_request(i, TEXT.replace("line ", f"interview {i // 10}, line ") + salt)
    ctx = CallContext(stage="judge", item=str(i // 10), step=i % 10)
    record = CallRecord.new(fake.identity(), req, fake.chat(req))
    # one time for every call, as a rerun's cache hits keep their records: only the changed call changes
    record = record.model_copy(update={"created_at": "2026-11-26T00:00:00Z"})
    record = record.model_copy(update={"checksum": record.expected_checksum()})
    return RecordedCall(context=ctx, record=record)
if step in ("write", "rerun"):
    recording = stage_writer.StageRecording()
    for i in range(calls):
        recording.add(call(i, " changed" if step == "rerun" and i == calls // 2 else ""))
    recording.write(directory)
elif step == "read":
    print(len(index_stage(directory)), file=sys.stderr)
elif step == "one":
    key = call(calls // 3).record.key
    assert len(list(key_reader.read_keys(directory, [key]))) == 1
"""


def run_step(step: str, layout: str, calls: int, directory: Path) -> tuple[float, float, float]:
    """wall s, CPU s (user+sys), peak MB of one step in a process of its own."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", STEP, step, layout, str(calls), str(directory)])
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise SystemExit(f"{step} {layout}: exit status {status}")
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10_000)
    args = parser.parse_args()
    print(f"{args.calls:,} calls, one stage")
    print("layout    step    wall s   CPU s   peak MB")
    for layout in ("one-file", "sharded"):
        with tempfile.TemporaryDirectory() as tmp:
            directory = Path(tmp) / "judge"
            for step in ("write", "read", "one"):
                wall, cpu, peak = run_step(step, layout, args.calls, directory)
                print(f"{layout:9} {step:6} {wall:8.2f} {cpu:7.2f} {peak:9.0f}")
            before = files(directory)
            wall, cpu, peak = run_step("rerun", layout, args.calls, directory)
            print(f"{layout:9} {'rerun':6} {wall:8.2f} {cpu:7.2f} {peak:9.0f}")
            after = files(directory)
            rewritten = sum(len(data) for name, data in after.items() if before.get(name) != data)
            on_disk = sum(len(data) for data in after.values())
            print(
                f"{layout:9} files {len(after)}, on disk {on_disk / 1e6:.1f} MB, rerun of one call rewrote "
                f"{rewritten / 1e6:.2f} MB"
            )
            shutil.rmtree(directory)


if __name__ == "__main__":
    main()
