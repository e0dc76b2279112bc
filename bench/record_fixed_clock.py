"""Record the paper's three LLM stages live on the fake backend under a fixed clock (created_at and
meta.wall_ns pinned), and print one sha256 over every recording file, one over every output file
and one over the run summaries (.judgeloop/runs), so that two code versions' recordings and outputs
can be compared byte for byte (issue 33: a recording cut must leave the bytes alone); with each
stage's close, the process's peak so far and its anonymous memory then (which stage sets the
run's peak), and the run's CPU and wall so far (each stage's own, by difference).

    nice -n 19 .venv/bin/python bench/record_fixed_clock.py /tmp/main-src /tmp/rec-3k
    nice -n 19 .venv/bin/python bench/record_fixed_clock.py . /tmp/rec-3k

The first argument is the code's root (a `git archive` of another commit, say); the project under
the second is made by bench/replay_memory.py (its data/ and params.yaml); its recordings, outputs
and local cache are deleted first.
"""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


class _FixedDatetime(datetime):
    @classmethod
    def now(cls, tz: Any = None) -> _FixedDatetime:
        return cls(2026, 1, 1, tzinfo=UTC)


class _FixedTime:
    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    @staticmethod
    def perf_counter_ns() -> int:
        return 1000


def anonymous_mb() -> int:
    """The process's anonymous resident memory, MB (Linux; -1 elsewhere)."""
    try:
        lines = Path("/proc/self/smaps_rollup").read_text().splitlines()
    except OSError:
        return -1
    return next((int(line.split()[1]) // 1024 for line in lines if line.startswith("Anonymous:")), -1)


def peak_mb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def tree_digest(root: Path) -> tuple[int, str]:
    """How many files under `root`, and one sha256 over their names and contents. Each file is
    hashed in chunks, not read whole: at 1M calls outputs/'s refinement.jsonl is 3.2 GB, and reading
    it whole set the process's ru_maxrss (3.7 GB against the run's 852 MB) after the run was over."""
    digest = hashlib.sha256()
    files = sorted(p for p in root.rglob("*") if p.is_file())
    for path in files:
        name = path.relative_to(root).as_posix().encode()
        with path.open("rb") as file:
            content = hashlib.file_digest(file, "sha256").digest()
        digest.update(name + b"\0" + content)
    return len(files), digest.hexdigest()


def main(code: Path, root: Path) -> None:
    sys.path.insert(0, str(code.resolve()))
    import pipeline.llm.records as records
    import pipeline.llm.session as session
    from pipeline.testing.synthetic import run_stages

    assert session.__file__ is not None and session.__file__.startswith(str(code.resolve())), session.__file__
    setattr(records, "datetime", _FixedDatetime)  # noqa: B010 (a module attribute replaced for the run)
    setattr(session, "time", _FixedTime())  # noqa: B010
    close = session.LLMSession.close
    begun = os.times()

    def closing(self: Any, **options: Any) -> None:
        before = (anonymous_mb(), peak_mb())
        close(self, **options)
        now = os.times()
        print(
            f"  {self.stage}: {self.recorded_calls} calls; before its write: anonymous {before[0]} MB, "
            f"peak {before[1]} MB; after: anonymous {anonymous_mb()} MB, peak {peak_mb()} MB; "
            f"run so far {now.user + now.system - begun.user - begun.system:.1f} s CPU, "
            f"{now.elapsed - begun.elapsed:.1f} s wall",
            flush=True,
        )

    setattr(session.LLMSession, "close", closing)  # noqa: B010
    for made in (".judgeloop", "recordings", "outputs"):
        shutil.rmtree(root / made, ignore_errors=True)
    started = os.times()
    calls = run_stages(root, "auto")
    ended = os.times()
    cpu = ended.user + ended.system - started.user - started.system
    print(f"recorded {calls} calls, {cpu:.1f} s CPU, peak {peak_mb()} MB")
    for folder in ("recordings", "outputs", ".judgeloop/runs"):
        count, digest = tree_digest(root / folder)
        print(f"{count} {folder} files, sha256 {digest}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
