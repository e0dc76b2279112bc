"""What reading the interviews costs a stage, whole process (issue 33): N synthetic DAIC-WOZ
interviews (pipeline.testing.synthetic's, about 20 kB and 255 turns each), indexed as a stage's
inputs index them, then each item read and its text rendered as a stage's prompts ask for it.

    nice -n 19 .venv/bin/python bench/transcript_reads.py --interviews 2000 --dir /tmp/reads
    nice -n 19 .venv/bin/python bench/transcript_reads.py --interviews 2000 --dir /tmp/reads \\
        --code /tmp/main    # the same, timing another checkout's pipeline/ (main against a branch)

Prints the process's CPU (user + system) for the index and for the reads, per interview, the
whole process's CPU and peak RSS, and a digest of every rendered text (the same on both sides, or
the cut changed a prompt). --stages 3 indexes and reads again twice more in the same process, as
the bench's in-process stages do (the memo of checked files then spares the index's parse); DVC's
stages are processes of their own, each paying --stages 1.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import sys
import time
from pathlib import Path


def cpu() -> float:
    usage = os.times()
    return usage.user + usage.system


def make(folder: Path, interviews: int, chars: int) -> None:
    from pipeline.testing.synthetic import FIRST_ITEM, transcript

    if folder.is_dir() and sum(1 for _ in folder.iterdir()) == interviews:
        return
    for item in range(FIRST_ITEM, FIRST_ITEM + interviews):
        (folder / f"{item}_P").mkdir(parents=True, exist_ok=True)
        text = transcript(item, chars)
        (folder / f"{item}_P" / f"{item}_TRANSCRIPT.csv").write_text(text, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--interviews", type=int, default=2000)
    parser.add_argument("--chars", type=int, default=20_000)
    parser.add_argument("--dir", type=Path, required=True, help="Where the interviews are made (kept).")
    parser.add_argument("--code", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--stages", type=int, default=1, help="Index and read this many times.")
    args = parser.parse_args()
    sys.path.insert(0, str(args.code.resolve()))
    from pipeline.data.settings import DataSettings
    from pipeline.data.transcripts import index_transcripts

    make(args.dir / "data", args.interviews, args.chars)
    settings = DataSettings(transcripts="data", limit=None)
    digest = hashlib.sha256()
    load = os.getloadavg()[0]
    wall = time.perf_counter()
    spent = {"index": 0.0, "reads": 0.0}
    for _ in range(args.stages):
        before = cpu()
        transcripts = index_transcripts(settings, args.dir)
        spent["index"] += cpu() - before
        before = cpu()
        for item_id in transcripts.ids:  # as judge and refine ask: by id, the text once or more
            transcript = transcripts.by_id[item_id]
            digest.update(transcript.text.encode())
            digest.update(transcript.text[:1].encode())
        spent["reads"] += cpu() - before
    wall = time.perf_counter() - wall
    n = args.interviews * args.stages
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{args.code}: {args.interviews} interviews x {args.stages}: index {spent['index']:.2f} CPU s "
        f"({spent['index'] / n * 1e6:.0f} us each), reads {spent['reads']:.2f} CPU s "
        f"({spent['reads'] / n * 1e6:.0f} us each); whole process {cpu():.2f} CPU s (its start and "
        f"imports included; making the files too when they were not there), wall {wall:.2f} s, "
        f"peak RSS {peak:.0f} MB, load {load:.1f} -> "
        f"{os.getloadavg()[0]:.1f}; texts {digest.hexdigest()[:16]}"
    )


if __name__ == "__main__":
    main()
