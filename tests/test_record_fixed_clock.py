"""bench/record_fixed_clock.py's digest of a run's files: the same sha256 as over each file read
whole, without holding a file whole (issue 33: at 1M calls reading the 3.2 GB refinement.jsonl
whole set the bench process's peak, 3.7 GB, after a recording run that had peaked at 852 MB)."""

from __future__ import annotations

import hashlib
import tracemalloc
from pathlib import Path

from bench.record_fixed_clock import tree_digest

BIG = 8 * 2**20


def test_tree_digest_is_over_names_and_contents(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    files = {"a.jsonl": b"one\n", "b/c.jsonl": bytes(range(256)) * 5000}
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
    expected = hashlib.sha256()
    for name in sorted(files):
        expected.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    assert tree_digest(tmp_path) == (2, expected.hexdigest())


def test_tree_digest_does_not_hold_a_file_whole(tmp_path: Path) -> None:
    (tmp_path / "big.jsonl").write_bytes(b"x" * BIG)
    tracemalloc.start()
    try:
        count, _ = tree_digest(tmp_path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 1
    assert peak < BIG // 4, f"{peak:,} bytes traced while hashing an {BIG:,}-byte file"
