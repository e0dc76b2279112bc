"""The embedded model's file hash memo (`file-hashes.json` in the cache folder, a folder others may
share): written in one step that replaces what stands at its name, never through a link planted
there; a memo of another shape is ignored, never a traceback (writers-red)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from pipeline.llm.backends.embedded import file_sha256


def _weights(tmp_path: Path) -> tuple[Path, str]:
    weights = tmp_path / "model.gguf"
    weights.write_bytes(b"weights" * 100)
    return weights, hashlib.sha256(weights.read_bytes()).hexdigest()


def test_a_link_planted_at_the_memo_s_name_is_replaced_not_written_through(tmp_path: Path) -> None:
    weights, digest = _weights(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("someone else's file\n")
    (cache / "file-hashes.json").symlink_to(outside)
    assert file_sha256(weights, cache) == digest
    assert outside.read_text() == "someone else's file\n"
    memo = cache / "file-hashes.json"
    assert not memo.is_symlink() and digest in json.loads(memo.read_text()).values()


@pytest.mark.parametrize("planted", ["[1, 2]", '"a string"', "3", "null", '{"k": 5}'])
def test_a_memo_of_another_shape_is_ignored(tmp_path: Path, planted: str) -> None:
    weights, digest = _weights(tmp_path)
    (tmp_path / "file-hashes.json").write_text(planted)
    assert file_sha256(weights, tmp_path) == digest
