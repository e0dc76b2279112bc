"""`judgeloop check` hashes each out a chunk at a time (issue 33): at 1M calls refine's recording is
3.3 GB of shards and refinement.jsonl 3.2 GB, which a whole read would hold (997 MB peak at 96k)."""

from __future__ import annotations

import hashlib
import os
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from pipeline.llm.recordings.pins import dir_md5, files_md5, folder_files
from pipeline.tools.check import md5_of

BIG = 8 * 2**20


def _peak_while(work: Callable[[], str | None]) -> tuple[str | None, int]:
    """What `work` returns, and the most Python memory it held at once."""
    tracemalloc.start()
    try:
        result = work()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak


def test_an_out_is_hashed_as_dvc_hashes_it_without_holding_its_files(tmp_path: Path) -> None:
    folder = tmp_path / "recordings" / "refine"
    (folder / "blocks").mkdir(parents=True)
    big = os.urandom(BIG)
    (folder / "blocks" / "0.jsonl").write_bytes(big)
    (folder / "calls.jsonl").write_bytes(b'{"a": 1}\n')
    (folder / ".calls.jsonl.0123abcd.tmp").write_bytes(b"left by a killed writer")
    expected = files_md5(folder_files(folder))  # the whole read's md5, as before

    found, peak = _peak_while(lambda: dir_md5(folder))
    assert found == expected
    assert peak < BIG // 4, peak

    one = folder / "blocks" / "0.jsonl"
    found, peak = _peak_while(lambda: md5_of(one))
    assert found == hashlib.md5(big).hexdigest()
    assert peak < BIG // 4, peak
    assert md5_of(folder) == expected
