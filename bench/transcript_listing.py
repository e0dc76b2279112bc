"""What finding the interview files costs (pipeline.data.transcript_places.found), apart from reading
them: N one-byte files flat (NNN_TRANSCRIPT.csv), N in DAIC-WOZ's folders (NNN_P/NNN_TRANSCRIPT.csv),
and N links inside the folder (each to a file of its own in store/), the worst case of the check
that a link stays inside the folder (a realpath each).

    nice -n 19 .venv/bin/python bench/transcript_listing.py --entries 50000 --dir /tmp/listing
    nice -n 19 .venv/bin/python bench/transcript_listing.py --entries 50000 --dir /tmp/listing \\
        --code /tmp/main    # another checkout's pipeline/ (main against a branch)

Prints CPU (user + system) and wall per entry for each layout, twice (the second with the folder's
entries in the kernel's caches as a stage meets them), and the peak of memory traced while the
folders are listed (held only while `found` runs), per entry.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc
from pathlib import Path


def make(base: Path, entries: int) -> None:
    if (base / "done").exists():
        return
    for layout in ("flat", "nested", "links/store"):
        (base / layout).mkdir(parents=True, exist_ok=True)
    for n in range(entries):
        (base / "flat" / f"{n}_TRANSCRIPT.csv").write_bytes(b"x")
        (base / "nested" / f"{n}_P").mkdir(exist_ok=True)
        (base / "nested" / f"{n}_P" / f"{n}_TRANSCRIPT.csv").write_bytes(b"x")
        (base / "links" / "store" / f"s{n}").write_bytes(b"x")
        os.symlink(f"store/s{n}", base / "links" / f"{n}_TRANSCRIPT.csv")
    (base / "done").touch()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--entries", type=int, default=50_000)
    parser.add_argument("--dir", type=Path, required=True, help="Where the folders are made (kept).")
    parser.add_argument("--code", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args()
    sys.path.insert(0, str(args.code.resolve()))
    from pipeline.data.transcript_places import found

    make(args.dir, args.entries)
    n, load = args.entries, os.getloadavg()[0]
    print(f"{args.code}: {n} entries a layout, load {load:.1f}")
    for layout in ("flat", "nested", "links"):
        for _ in range(2):
            times, wall = os.times(), time.perf_counter()
            files = found(args.dir / layout, args.dir)
            wall, after = time.perf_counter() - wall, os.times()
            cpu = after.user + after.system - times.user - times.system
            assert len(files) == n, len(files)
            print(f"  {layout:7} {cpu / n * 1e6:6.1f} us CPU an entry, wall {wall / n * 1e6:6.1f} us")
        tracemalloc.start()
        found(args.dir / layout, args.dir)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"  {layout:7} peak traced while listing: {peak / n:.0f} bytes an entry")
    print(f"  load after {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
