"""Fuzzing the memo of recordings verified in full (pipeline.llm.recordings.verified_memo): its folder
(`.judgeloop/verified/`) is local state as untrusted as any file, handed over inside a project or
written by someone else. Whatever it holds (entries named as a digest, as its HMAC under another
key, as this key's HMAC of another digest; files, folders, links, odd names, bytes in the files;
the folder itself a file or a link), a digest is vouched for only where this user's judgeloop
remembered it: never a traceback, never a recording left unverified because of a planted entry."""

from __future__ import annotations

import hashlib
import hmac
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.llm.recordings import verified_memo
from pipeline.llm.recordings.verified_memo import VerifiedMemo, forget_in_process
from tests.fuzz.support import fuzz, time_bound

DIGESTS = [hashlib.sha256(str(n).encode()).hexdigest() for n in range(6)]
OTHER_KEY = b"k" * 32


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """This user's memo key, in a file of the test's own."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(verified_memo.KEY_ENV, str(tmp_path_factory.mktemp("key") / "memo.key"))
        verified_memo._key.cache_clear()
        yield tmp_path_factory.mktemp("memo")
    verified_memo._key.cache_clear()
    forget_in_process()


def _own(digest: str) -> str:
    entry = verified_memo._entry(digest)
    assert entry is not None
    return entry


def _name(draw: st.DrawFn) -> str:
    digest = draw(st.sampled_from(DIGESTS))
    return draw(
        st.sampled_from(
            [
                digest,  # the digest itself, as a memo without a key would name it
                hmac.new(OTHER_KEY, digest.encode(), hashlib.sha256).hexdigest(),  # another user's
                _own(digest).upper(),
                _own(digest) + " ",
                _own(digest) + "\n",
                "." + _own(digest),
                "x" * 64,
            ]
        )
    )


@st.composite
def plantings(draw: st.DrawFn) -> list[tuple[str, str, bytes]]:
    """(name, what is put there, its bytes): entries someone else wrote."""
    kinds = st.sampled_from(["file", "folder", "link", "dangling link"])
    return [(_name(draw), draw(kinds), draw(st.binary(max_size=40))) for _ in range(draw(st.integers(1, 6)))]


def _plant(folder: Path, name: str, kind: str, data: bytes) -> None:
    path = folder / name
    if os.path.lexists(path):
        return
    if kind == "file":
        path.write_bytes(data)
    elif kind == "folder":
        path.mkdir()
    elif kind == "link":
        target = folder.parent / f"target-{len(data)}"
        target.write_bytes(data)
        path.symlink_to(target)
    else:
        path.symlink_to(folder.parent / "nowhere")


@fuzz
@given(
    planted=plantings(),
    remembered=st.sets(st.sampled_from(DIGESTS), max_size=3),
    stolen=st.sets(st.sampled_from(DIGESTS), max_size=2),
)
def test_a_memo_folder_vouches_only_for_what_this_user_remembered(
    keyed: Path, planted: list[tuple[str, str, bytes]], remembered: set[str], stolen: set[str]
) -> None:
    shutil.rmtree(keyed)
    keyed.mkdir()
    folder = keyed / "verified"
    folder.mkdir()
    for name, kind, data in planted:
        _plant(folder, name, kind, data)
    for digest in stolen:  # this key's own entry, as a link to a file elsewhere: not the memo's
        _plant(folder, _own(digest), "link", b"")
    forget_in_process()
    with time_bound():
        for digest in remembered:
            VerifiedMemo(folder).remember(digest)
        forget_in_process()  # what the folder says, not what this process saw
        vouched = {digest for digest in DIGESTS if VerifiedMemo(folder).holds_digest(digest) is None}
    # A planted plain file at this key's own name vouches, as remember's would: only the key's
    # holder can name it, and _plant never writes one.
    assert vouched <= remembered, f"vouched for {sorted(vouched - remembered)} it never verified"


def test_a_memo_folder_that_is_a_file_vouches_for_nothing(keyed: Path) -> None:
    shutil.rmtree(keyed)
    keyed.mkdir()
    folder = keyed / "verified"
    folder.write_bytes(b"")
    forget_in_process()
    VerifiedMemo(folder).remember(DIGESTS[1])  # cannot be written: no error, nothing remembered on disk
    forget_in_process()
    assert VerifiedMemo(folder).holds_digest(DIGESTS[1]) == DIGESTS[1]
