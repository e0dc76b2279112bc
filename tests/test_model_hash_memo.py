"""The embedded model's file hash memo (`file-hashes.json` in the cache folder, a folder others may
share): written in one step that replaces what stands at its name, never through a link planted
there; a memo of another shape is ignored, never a traceback (writers-red). Trusted only where no
one else may write it, and keyed by the model file's identity (links-trust)."""

from __future__ import annotations

import hashlib
import json
import os
import types
from pathlib import Path
from typing import Any

import pytest

from pipeline.llm import private_memo
from pipeline.llm.backends import hash_memo
from pipeline.llm.backends.hash_memo import MEMO_NAME, file_sha256, identity


@pytest.fixture(autouse=True)
def _settled(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The clock moved past the racy window, so that a file just written may be remembered (the tests
    of the window itself keep the real clock)."""
    if "racy" not in request.node.name:
        monkeypatch.setattr(private_memo, "now_ns", lambda: 2**62)


def _weights(tmp_path: Path) -> tuple[Path, str]:
    weights = tmp_path / "model.gguf"
    weights.write_bytes(b"weights" * 100)
    return weights, hashlib.sha256(weights.read_bytes()).hexdigest()


def test_a_link_planted_at_the_memo_s_name_is_replaced_not_written_through(tmp_path: Path) -> None:
    weights, digest = _weights(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    outside = tmp_path / "outside.txt"
    outside.write_text("someone else's file\n")
    (cache / "file-hashes.json").symlink_to(outside)
    assert file_sha256(weights, cache) == digest
    assert outside.read_text() == "someone else's file\n"
    memo = cache / "file-hashes.json"
    assert not memo.is_symlink() and digest in json.loads(memo.read_text()).values()


@pytest.mark.parametrize(
    "planted", ["[1, 2]", '"a string"', "3", "null", '{"k": 5}', "[" * 20000 + "]" * 20000]
)
def test_a_memo_of_another_shape_is_ignored(tmp_path: Path, planted: str) -> None:
    weights, digest = _weights(tmp_path)
    (tmp_path / "file-hashes.json").write_text(planted)
    assert file_sha256(weights, tmp_path) == digest


def _planted(memo_folder: Path, weights: Path) -> None:
    """A memo that gives every key a memo could use for `weights` (the old path/size/mtime key and the
    new identity key) a sha256 that is not the file's."""
    status = weights.stat()
    keys = [
        f"{weights.resolve()}|{status.st_size}|{status.st_mtime_ns}",
        identity(status),
    ]
    (memo_folder / MEMO_NAME).write_text(json.dumps(dict.fromkeys(keys, "0" * 64)))


def test_a_memo_in_a_folder_others_may_write_is_not_trusted_nor_written(tmp_path: Path) -> None:
    weights, digest = _weights(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir()
    _planted(cache, weights)
    planted = (cache / MEMO_NAME).read_bytes()
    os.chmod(cache, 0o775)  # a group's shared cache folder
    assert file_sha256(weights, cache) == digest
    assert (cache / MEMO_NAME).read_bytes() == planted  # not written: others could plant it again


def test_a_memo_others_may_write_is_not_trusted(tmp_path: Path) -> None:
    weights, digest = _weights(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    _planted(cache, weights)
    os.chmod(cache / MEMO_NAME, 0o666)
    assert file_sha256(weights, cache) == digest


def test_an_entry_made_before_the_file_changed_is_not_used(tmp_path: Path) -> None:
    """The file written again with its size and mtime set back: only the ctime tells."""
    weights, digest = _weights(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    assert file_sha256(weights, cache) == digest
    before = weights.stat()
    weights.write_bytes(b"WEIGHTS" * 100)  # the same size
    os.utime(weights, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert weights.stat().st_ctime_ns != before.st_ctime_ns or pytest.skip("ctime did not move")
    assert file_sha256(weights, cache) == hashlib.sha256(b"WEIGHTS" * 100).hexdigest()


def test_a_private_memo_is_used_and_names_the_file_by_its_identity(tmp_path: Path) -> None:
    weights, digest = _weights(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    assert file_sha256(weights, cache) == digest
    memo = cache / MEMO_NAME
    assert json.loads(memo.read_text()) == {identity(weights.stat()): digest}
    assert memo.stat().st_mode & 0o077 == 0
    memo.write_text(json.dumps({identity(weights.stat()): "1" * 64}))  # this user's own memo is believed
    memo.chmod(0o600)
    assert file_sha256(weights, cache) == "1" * 64


def _counting_hashes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times the model file is read through sha256 from now on."""
    counted: list[int] = []
    real = hashlib.sha256

    def counting(*args: Any) -> Any:
        counted.append(1)
        return real(*args)

    monkeypatch.setattr(hashlib, "sha256", counting)  # the module hash_memo reads it from
    return counted


@pytest.mark.parametrize("mode", [0o775, 0o2770])
def test_a_cache_folder_the_group_may_write_still_spares_each_stage_the_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: int
) -> None:
    """Under umask 002 (Debian's and Ubuntu's for a user with a group of their own) the cache folder is
    made 0775, and a team's cache on a shared disk is its group's to write: the memo is kept in a
    folder of this user's own there (0700), so the model is hashed once rather than at every stage's
    start; a memo planted in the shared folder itself is still never believed (review6)."""
    weights, digest = _weights(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir()
    _planted(cache, weights)
    os.chmod(cache, mode)
    hashed = _counting_hashes(monkeypatch)
    assert file_sha256(weights, cache) == digest
    assert file_sha256(weights, cache) == digest
    assert len(hashed) == 1


def test_a_private_folder_planted_in_a_shared_cache_folder_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What stands at the name of this user's own memo folder in a shared cache folder is used only
    where it is a folder of this user's that no one else may write: not a link, not a folder others
    may write (each time hashed, never believed)."""
    weights, digest = _weights(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o775)
    os.chmod(cache, 0o775)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    _planted(elsewhere, weights)
    os.chmod(elsewhere / MEMO_NAME, 0o600)
    own = hash_memo.memo_folder(cache)
    assert own is not None and own.parent == cache
    own.rmdir()
    own.symlink_to(elsewhere)
    assert file_sha256(weights, cache) == digest
    own.unlink()
    own.mkdir(mode=0o700)
    _planted(own, weights)
    os.chmod(own, 0o777)
    hashed = _counting_hashes(monkeypatch)
    assert file_sha256(weights, cache) == digest
    assert file_sha256(weights, cache) == digest
    assert len(hashed) == 2


def test_a_file_written_within_the_racy_window_is_not_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Git's racy-index rule: the file hashed just after it was written, then written again within the
    same tick of the filesystem's clock (simulated: its identity kept) would be served the first
    sha256 had the entry been made; so no entry is made until the file is RACY_NS old."""
    weights, digest = _weights(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    assert file_sha256(weights, cache) == digest  # the real clock: written just now
    assert not (cache / MEMO_NAME).exists()
    before = weights.stat()
    weights.write_bytes(b"WEIGHTS" * 100)  # within the same tick: the identity as it was
    os.utime(weights, ns=(before.st_atime_ns, before.st_mtime_ns))
    monkeypatch.setattr(hash_memo, "identity", lambda status: identity(before))
    assert file_sha256(weights, cache) == hashlib.sha256(b"WEIGHTS" * 100).hexdigest()
    monkeypatch.setattr(private_memo, "now_ns", lambda: before.st_ctime_ns + private_memo.RACY_NS - 1)
    assert not private_memo.settled(before, private_memo.now_ns())
    monkeypatch.setattr(private_memo, "now_ns", lambda: 2**62)
    assert private_memo.settled(before, private_memo.now_ns())


def test_a_file_dated_after_now_is_racy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    weights, _ = _weights(tmp_path)
    ahead = 2**62
    os.utime(weights, ns=(ahead, ahead))
    assert not private_memo.settled(weights.stat(), private_memo.now_ns())


def test_a_file_racy_when_its_hash_began_is_not_remembered_however_long_the_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The racy rule is judged at the start of the read (review13): a model file changed within
    RACY_NS before it was opened may be written again within the same tick while it is hashed (its
    identity kept), so a hash that outlasts RACY_NS (a model of several GB) must not make it settled."""
    weights, digest = _weights(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    status = weights.stat()
    clock = [max(status.st_mtime_ns, status.st_ctime_ns) + 10**6]  # opened 1 ms after the last change
    monkeypatch.setattr(private_memo, "now_ns", lambda: clock[0])
    real = hashlib.sha256

    def slow(*args: Any) -> Any:
        clock[0] += 10 * private_memo.RACY_NS  # the hash outlasts the window
        return real(*args)

    monkeypatch.setattr(hash_memo, "hashlib", types.SimpleNamespace(sha256=slow))
    assert file_sha256(weights, cache) == digest
    assert not (cache / MEMO_NAME).exists()
