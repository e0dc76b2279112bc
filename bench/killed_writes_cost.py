"""What holding each write's temporary file locked, and sweeping a folder once a process, costs
(pipeline.llm.killed_writes: locked_temporary, sweep_killed_writers), against another checkout's.

    .venv/bin/python bench/killed_writes_cost.py --base /work/main --rounds 4

Each round runs this checkout and the base in turn, each in a fresh process: 1,000 atomic_write calls
of a small file into a folder of 10,000 other files, fsync left out (the disk's time would drown the
writer's own), CPU time (process_time) and wall per write; then, this checkout only, one sweep of the
10,000-file folder. Results: bench/README.md ("Killed writes' temporary files").
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ONE_RUN = """
import os, tempfile, time
from pathlib import Path
from pipeline.llm import files
os.fsync = lambda fd: None
with tempfile.TemporaryDirectory() as d:
    folder = Path(d)
    for i in range(10000):
        (folder / f"calls-{i}.jsonl").write_text("x")
    cpu, wall = time.process_time(), time.perf_counter()
    for i in range(1000):
        files.atomic_write(folder / f"o{i % 20}.json", "{}\\n")
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    line = f"{cpu * 1e3:.0f} us CPU, {wall * 1e3:.0f} us wall a write"
    try:  # where the sweep lives now; an older checkout's files.py held it (or none)
        from pipeline.llm import killed_writes as sweeps
    except ImportError:
        sweeps = files
    if hasattr(sweeps, "sweep_killed_writers"):
        sweeps._swept.clear()
        cpu = time.process_time()
        sweeps.sweep_killed_writers(folder)
        line += f"; a sweep of 10,000 files {(time.process_time() - cpu) * 1e3:.2f} ms CPU"
    print(line)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, required=True, help="another checkout (its files.py)")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    here = Path(__file__).resolve().parent.parent
    for round_ in range(1, args.rounds + 1):
        for name, root in (("this", here), ("base", args.base.resolve())):
            env = {**os.environ, "PYTHONPATH": str(root)}
            command = [sys.executable, "-c", ONE_RUN]  # in `root`: `-c` puts the working folder first
            done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, check=True)
            print(f"round {round_} {name}: {done.stdout.strip()}")
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
