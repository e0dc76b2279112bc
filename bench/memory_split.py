"""A command's peak memory, split: ru_maxrss, and the peaks of /proc/PID/smaps_rollup's Rss and
Anonymous (file-mapped = Rss - Anonymous), threads, open descriptors and mappings of a
`cache.db`, sampled every 0.5 s; and its CPU (user + sys). Linux only.

    nice -n 19 .venv/bin/python bench/memory_split.py .venv/bin/python bench/replay_profile.py \\
        --root /tmp/replay-30k --no-profile
"""

from __future__ import annotations

import contextlib
import os
import resource
import subprocess
import sys
import time


def kb(path: str, key: str) -> int:
    with open(path) as f:
        return next((int(line.split()[1]) for line in f if line.startswith(key + ":")), 0)


def sample(pid: int, peak: dict[str, int]) -> None:
    rss, anon = kb(f"/proc/{pid}/smaps_rollup", "Rss"), kb(f"/proc/{pid}/smaps_rollup", "Anonymous")
    with open(f"/proc/{pid}/maps") as f:
        maps = sum(1 for line in f if line.rstrip().endswith("cache.db"))
    now = {
        "rss": rss,
        "anon": anon,
        "file": rss - anon,
        "threads": len(os.listdir(f"/proc/{pid}/task")),
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
        "db_maps": maps,
    }
    for key, value in now.items():
        peak[key] = max(peak.get(key, 0), value)


def main() -> None:
    child = subprocess.Popen(sys.argv[1:])
    peak: dict[str, int] = {}
    while child.poll() is None:
        with contextlib.suppress(OSError, ValueError):  # ended between two reads
            sample(child.pid, peak)
        time.sleep(0.5)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    mb = {k: v // 1024 for k, v in peak.items() if k in ("rss", "anon", "file")}
    print(
        f"MEASURE rc={child.returncode} cpu_s={usage.ru_utime + usage.ru_stime:.1f} "
        f"maxrss_MB={usage.ru_maxrss // 1024} sampled_peak_rss_MB={mb.get('rss', 0)} "
        f"anon_MB={mb.get('anon', 0)} file_MB={mb.get('file', 0)} threads={peak.get('threads', 0)} "
        f"fds={peak.get('fds', 0)} cache_db_maps={peak.get('db_maps', 0)} load={os.getloadavg()[0]:.1f}",
        flush=True,
    )


if __name__ == "__main__":
    main()
