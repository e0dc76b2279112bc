"""A recording read only for its models, answered from the private memo keyed by its files'
identities (pipeline.llm.recordings.models_memo, issue 33): answered without reading a byte where
the folder is as remembered; read again (and a tamper refused) where a file changed, even with its
size and mtime set back, where it changed too recently to be remembered, where the memo is a link
or others may write it, or where what it states is not what the pin or the verified memo hold."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest

from pipeline.errors import JudgeloopError, LockMismatchError
from pipeline.llm import private_memo
from pipeline.llm.recordings import models_memo, shards, stage_folders, stage_writer, verified_memo
from pipeline.llm.recordings.folder_scan import Models
from pipeline.llm.recordings.pins import Pins
from pipeline.llm.recordings.stage_index import index_stage
from pipeline.llm.recordings.verified_memo import VerifiedMemo
from tests.test_recordings import _calls


@pytest.fixture(autouse=True)
def _fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv(verified_memo.KEY_ENV, str(tmp_path / "memo.key"))
    verified_memo._key.cache_clear()
    verified_memo.forget_in_process()
    yield
    verified_memo._key.cache_clear()
    verified_memo.forget_in_process()


def _settle(monkeypatch: pytest.MonkeyPatch) -> None:
    """The clock moved past the racy window: the files just written count as settled."""
    monkeypatch.setattr(private_memo, "now_ns", lambda: 2**62)


def _verified(tmp_path: Path, calls: int = 6) -> tuple[Path, VerifiedMemo, Models]:
    directory = tmp_path / "recordings" / "judge"
    stage_writer.write_stage(directory, _calls(calls))
    memo = VerifiedMemo(tmp_path / "state" / "verified")
    index = index_stage(directory, memo=memo)  # verified in full, remembered
    return directory, memo, frozenset(index.models)


def _reads(monkeypatch: pytest.MonkeyPatch, before: Callable[[Path], None] | None = None) -> list[Path]:
    """Each time the recording is read (verified_models) from now on; `before(folder)` run as each
    read begins."""
    read: list[Path] = []
    real = models_memo.verified_models  # type: ignore[attr-defined]

    def counting(directory: Path, *args: object) -> object:
        read.append(directory)
        if before is not None:
            before(directory)
        return real(directory, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(models_memo, "verified_models", counting)
    return read


def _read_again(monkeypatch: pytest.MonkeyPatch, directory: Path, memo: VerifiedMemo, models: Models) -> None:
    """The memo's entry not believed: the recording is read again, once, and its models served."""
    read = _reads(monkeypatch)
    assert models_memo.models(directory, None, memo) == models
    assert read == [directory]


def _read_not_remembered(
    monkeypatch: pytest.MonkeyPatch,
    directory: Path,
    memo: VerifiedMemo,
    models: Models,
    before: Callable[[Path], None],
) -> None:
    """The recording read (`before(folder)` run as its read begins), its models served, and no
    entry made."""
    _reads(monkeypatch, before)
    assert models_memo.models(directory, None, memo) == models
    assert not _memo_file(memo).exists()


def _memo_file(memo: VerifiedMemo) -> Path:
    assert memo.folder is not None
    return memo.folder / models_memo.MEMO_NAME


def test_a_settled_recording_s_models_are_answered_without_reading_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _settle(monkeypatch)
    directory, memo, models = _verified(tmp_path)
    read = _reads(monkeypatch)
    assert models_memo.models(directory, None, memo) == models  # read, remembered
    verified_memo.forget_in_process()
    assert models_memo.models(directory, None, memo) == models  # from the memo
    assert read == [directory]
    assert _memo_file(memo).stat().st_mode & 0o077 == 0


def test_a_file_written_again_with_its_size_and_mtime_set_back_is_read_and_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _settle(monkeypatch)
    directory, memo, models = _verified(tmp_path)
    assert models_memo.models(directory, None, memo) == models
    path = directory / stage_folders.CALLS_FILE
    before = path.stat()
    path.write_bytes(path.read_bytes().replace(b'"created_at":"2', b'"created_at":"3', 1))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert after.st_ctime_ns != before.st_ctime_ns or pytest.skip("ctime did not move")
    read = _reads(monkeypatch)
    verified_memo.forget_in_process()
    assert models_memo.models(directory, None, memo) is None  # not verified: the full read refuses it
    assert read == [directory]


def test_a_recording_changed_within_the_racy_window_is_not_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written just now (the real clock): a write within the same tick of the filesystem's clock could
    leave its identity as it is, so no entry is made, and the next read reads it again."""
    directory, memo, models = _verified(tmp_path)
    read = _reads(monkeypatch)
    assert models_memo.models(directory, None, memo) == models
    assert models_memo.models(directory, None, memo) == models
    assert read == [directory, directory]
    assert not _memo_file(memo).exists()


@pytest.mark.parametrize("planted", ["writable by others", "a link", "in a folder others may write"])
def test_a_memo_others_could_have_written_is_not_believed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, planted: str
) -> None:
    _settle(monkeypatch)
    directory, memo, models = _verified(tmp_path)
    assert models_memo.models(directory, None, memo) == models
    memo_file = _memo_file(memo)
    if planted == "writable by others":
        memo_file.chmod(0o666)
    elif planted == "a link":
        elsewhere = tmp_path / "elsewhere.json"
        memo_file.rename(elsewhere)
        memo_file.symlink_to(elsewhere)
    else:
        assert memo.folder is not None
        memo.folder.chmod(0o777)
    _read_again(monkeypatch, directory, memo, models)


def test_an_entry_whose_hashes_the_verified_memo_does_not_hold_is_not_believed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """This user's own memo, edited to state other sha256s for the same files: the content those
    name was never verified, so the recording is read (and nothing of the entry served)."""
    _settle(monkeypatch)
    directory, memo, models = _verified(tmp_path)
    assert models_memo.models(directory, None, memo) == models
    memo_file = _memo_file(memo)
    known = json.loads(memo_file.read_text())
    known["files"] = {marker: "0" * 64 + " " for marker in known["files"]}
    forged = models_memo._content_key(dict.fromkeys(os.listdir(directory), "0" * 64))
    known["models"] = {forged: {"order": os.listdir(directory), "models": [["fake", "forged", "0" * 64]]}}
    memo_file.write_text(json.dumps(known))
    memo_file.chmod(0o600)
    verified_memo.forget_in_process()
    _read_again(monkeypatch, directory, memo, models)


class _Pinned(Pins):
    """A pin that matches the folder's md5s, or (`refuse`) fails every md5 (dvc.lock relocked to other
    bytes, say)."""

    def __init__(self, *, refuse: bool) -> None:
        super().__init__()
        self.refuse = refuse

    def needs_hashes(self, directory: Path) -> bool:
        return True

    def check_hashes(self, directory: Path, md5s: dict[str, str]) -> None:
        if self.refuse or not all(md5s.values()):
            raise LockMismatchError(f"{directory}: does not match its pin")


def test_an_entry_whose_md5s_the_pin_refuses_is_not_believed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _settle(monkeypatch)
    directory, memo, models = _verified(tmp_path)
    assert models_memo.models(directory, _Pinned(refuse=False), memo) == models  # read, md5s remembered
    read = _reads(monkeypatch)
    assert models_memo.models(directory, _Pinned(refuse=False), memo) == models
    assert read == []  # answered from the memo, its md5s checked against the pin
    assert models_memo.models(directory, _Pinned(refuse=True), memo) is None  # read, refused by the pin
    assert read == [directory]


def test_a_file_replaced_between_the_listing_and_its_read_is_not_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The entry is keyed by the listing taken before the read: a file another one replaced in
    between (here the same bytes, so that the read succeeds) is not the file the listing names."""
    _settle(monkeypatch)
    directory, memo, models = _verified(tmp_path)

    def replaced_first(directory: Path) -> None:
        path = directory / stage_folders.CALLS_FILE
        fresh = path.with_name("fresh")
        fresh.write_bytes(path.read_bytes())
        fresh.replace(path)

    _read_not_remembered(monkeypatch, directory, memo, models, replaced_first)


def test_a_file_written_again_with_the_same_bytes_is_hashed_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sharded recording's manifest is written again by every replay of its stage: that file is
    hashed (its identity is new), the others' hashes come from the memo, and the content is known."""
    _settle(monkeypatch)
    monkeypatch.setattr(shards, "SHARD_AT", 8)
    directory, memo, models = _verified(tmp_path, 40)
    assert len(os.listdir(directory)) > 1
    assert models_memo.models(directory, None, memo) == models
    path = directory / stage_folders.CALLS_FILE
    fresh = path.with_name("fresh")
    fresh.write_bytes(path.read_bytes())
    fresh.replace(path)
    read = _reads(monkeypatch)
    verified_memo.forget_in_process()
    assert models_memo.models(directory, None, memo) == models
    assert read == []
    known = json.loads(_memo_file(memo).read_text())
    assert private_memo.identity(path.stat()) in known["files"]  # settled: remembered by its identity


def test_a_file_hashed_alone_within_the_racy_window_is_not_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _settle(monkeypatch)
    monkeypatch.setattr(shards, "SHARD_AT", 8)
    directory, memo, models = _verified(tmp_path, 40)
    assert models_memo.models(directory, None, memo) == models
    monkeypatch.setattr(private_memo, "now_ns", time.time_ns)  # the real clock again
    path = directory / stage_folders.CALLS_FILE
    fresh = path.with_name("fresh")
    fresh.write_bytes(path.read_bytes())
    fresh.replace(path)  # written just now
    verified_memo.forget_in_process()
    assert models_memo.models(directory, None, memo) == models  # hashed now, so answered
    known = json.loads(_memo_file(memo).read_text())
    assert private_memo.identity(path.stat()) not in known["files"]


def test_a_recording_mostly_new_to_the_memo_is_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A one-file recording written again (its only file new to the memo) is read by verified_models
    alone, not hashed here first and then again there."""
    _settle(monkeypatch)
    directory, memo, models = _verified(tmp_path)
    assert models_memo.models(directory, None, memo) == models
    path = directory / stage_folders.CALLS_FILE
    fresh = path.with_name("fresh")
    fresh.write_bytes(path.read_bytes())
    fresh.replace(path)
    monkeypatch.setattr(models_memo, "_hashes", None)  # any hash here fails
    _read_again(monkeypatch, directory, memo, models)


@pytest.mark.parametrize("seal", ["kept", "dropped", "another key's"])
def test_models_written_into_the_memo_by_anything_but_this_user_s_judgeloop_are_not_believed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seal: str
) -> None:
    """The memo is private, and each entry is also sealed with an HMAC under this user's memo key: an
    entry for the very content (its key, its files' real hashes and order) with other models is not
    believed, whether its seal is kept, dropped, or made under another key."""
    _settle(monkeypatch)
    directory, memo, models = _verified(tmp_path)
    assert models_memo.models(directory, None, memo) == models
    memo_file = _memo_file(memo)
    known = json.loads(memo_file.read_text())
    for entry in known["models"].values():
        entry["models"] = [["fake", "forged", "0" * 64]]
        if seal == "dropped":
            del entry["seal"]
        elif seal == "another key's":
            entry["seal"] = hmac.new(b"k" * 32, b"anything", hashlib.sha256).hexdigest()
    memo_file.write_text(json.dumps(known))
    memo_file.chmod(0o600)
    verified_memo.forget_in_process()
    _read_again(monkeypatch, directory, memo, models)


def test_a_file_only_the_pin_covers_is_not_remembered_while_racy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sharded recording's item tables are not read by verified_models (only the pin covers them):
    hashed to be remembered, under the same racy rule (here one dated at the clock's now)."""
    _settle(monkeypatch)
    monkeypatch.setattr(shards, "SHARD_AT", 8)
    directory, memo, models = _verified(tmp_path, 40)
    tables = sorted(name for name in os.listdir(directory) if name.startswith("items-"))
    assert tables
    os.utime(directory / tables[0], ns=(2**62, 2**62))  # as recent as the (moved) clock
    assert models_memo.models(directory, None, memo) == models
    assert not _memo_file(memo).exists()


def _clock_from(monkeypatch: pytest.MonkeyPatch, start: int) -> list[int]:
    """A clock at `start` that moves only when told (the list's one value)."""
    clock = [start]
    monkeypatch.setattr(private_memo, "now_ns", lambda: clock[0])
    return clock


def test_a_recording_racy_when_its_read_began_is_not_remembered_however_long_the_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The racy rule is judged at the start of the read (review13): a file changed within RACY_NS
    before it was listed may be written again within the same tick while it is read (its identity
    kept), so a read and parse that outlast RACY_NS (a recording of a million calls) must not make
    it settled and its models remembered."""
    directory, memo, models = _verified(tmp_path)
    newest = max(max(p.stat().st_mtime_ns, p.stat().st_ctime_ns) for p in directory.iterdir())
    clock = _clock_from(monkeypatch, newest + 10**6)  # listed 1 ms after the last change

    def slow(folder: Path) -> None:
        clock[0] += 10 * private_memo.RACY_NS  # the read and parse take longer than the window

    _read_not_remembered(monkeypatch, directory, memo, models, slow)


def test_a_file_racy_when_its_hash_began_is_not_settled_however_long_the_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same rule for a file hashed alone (a rewritten manifest, an item table)."""
    directory, _, _ = _verified(tmp_path)
    path = directory / stage_folders.CALLS_FILE
    status = path.stat()
    clock = _clock_from(monkeypatch, max(status.st_mtime_ns, status.st_ctime_ns) + 10**6)
    real = hashlib.md5

    def slow(*args: object) -> object:
        clock[0] += 10 * private_memo.RACY_NS  # the hash outlasts the window
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(hashlib, "md5", slow)  # the module models_memo hashes with
    value, steady = models_memo._hashes(path, private_memo.identity(status))
    assert value.split(" ")[0] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert not steady


@pytest.mark.parametrize("loose", ["readable by others", "a link to a file others may read"])
def test_a_memo_key_others_may_read_seals_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loose: str
) -> None:
    """The seal binds an entry to this user only while no one else knows the key (review13): a key
    file that others may read (or a link to one) is no key, so models sealed under it by whoever
    read it, into a memo this user then holds (a project handed over, unpacked by its recipient), are
    not believed, and nothing is remembered under it."""
    _settle(monkeypatch)
    shared = tmp_path / "shared.key"
    shared.write_bytes(b"s" * 32)
    shared.chmod(0o644)
    key = tmp_path / "memo.key"
    if loose == "a link to a file others may read":
        key.symlink_to(shared)
    else:
        key.write_bytes(shared.read_bytes())
        key.chmod(0o644)
    verified_memo._key.cache_clear()
    directory, memo, models = _verified(tmp_path)
    memo_file = _memo_file(memo)
    sha256s = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in directory.iterdir()}
    content_key = hashlib.sha256(
        orjson.dumps([verified_memo.verifier(), sorted(sha256s.items())])
    ).hexdigest()
    forged = [["fake", "forged", "0" * 64]]
    order = sorted(sha256s)
    assert order == [stage_folders.CALLS_FILE]  # one file: the order its read hashes it in

    def sealed(data: bytes) -> str:  # by whoever read the key
        return hmac.new(b"s" * 32, data, hashlib.sha256).hexdigest()

    files = {}
    for path in directory.iterdir():
        hashes = f"{sha256s[path.name]} {hashlib.md5(path.read_bytes()).hexdigest()}"
        marker = private_memo.identity(path.stat())
        files[marker] = f"{hashes} {sealed(f'file {marker} {hashes}'.encode())}"
    mark = sealed(orjson.dumps(["models", content_key, order, forged]))
    entry = {"order": order, "models": forged, "seal": mark}
    memo_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    memo_file.write_text(json.dumps({"files": files, "models": {content_key: entry}}))
    memo_file.chmod(0o600)
    verified_memo.forget_in_process()
    assert models_memo.models(directory, None, memo) in (models, None)
    assert verified_memo.seal(b"anything") is None


def test_a_recording_whose_file_is_a_link_to_a_remembered_file_is_read_not_answered_from_the_memo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DVC's symlink cache type (review13): a file of the recording checked out as a link, even to the
    very file remembered (its identity unchanged), is never answered from the memo; verified_models
    reads the folder (and refuses a link that is not into DVC's cache, naming it)."""
    _settle(monkeypatch)
    directory, memo, models = _verified(tmp_path)
    assert models_memo.models(directory, None, memo) == models  # remembered
    linked = directory.parent / "refine"  # its file a link to the file remembered, left untouched
    linked.mkdir()
    (linked / stage_folders.CALLS_FILE).symlink_to(directory / stage_folders.CALLS_FILE)
    read = _reads(monkeypatch)
    verified_memo.forget_in_process()
    with contextlib.suppress(JudgeloopError):
        models_memo.models(linked, None, memo)
    assert read == [linked]
