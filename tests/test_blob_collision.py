"""A recording's blob ids are 64 bits of sha256: two texts sharing one (made on purpose in about
2**32 tries) are refused when the recording is written, not kept as one text for both, which wrote
a recording whose other call failed its check on every read (pipeline.llm.recordings.line_format)."""

from __future__ import annotations

import pytest

from pipeline.errors import CacheError
from pipeline.llm.recordings import line_format
from pipeline.llm.recordings.line_format import pack_content, unpack_content

A = "Participant: " + "I sleep badly, " * 30  # one line of 463 characters: one block (MIN_BLOCK 256)
B = A.replace("sleep", "work")


def test_two_texts_whose_blob_ids_collide_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    real = line_format.blob_id
    # B's blocks get A's ids, as a pair made to collide would: A's own blocks keep theirs.
    monkeypatch.setattr(line_format, "blob_id", lambda text: real(text.replace("work", "sleep")))
    blobs: dict[str, str] = {}
    packed = pack_content(A, blobs)
    assert unpack_content(packed, blobs, "w") == A
    assert unpack_content(pack_content(A, blobs), blobs, "w") == A  # the same text again is one blob
    kept = dict(blobs)
    with pytest.raises(CacheError, match=r"share the blob id [0-9a-f]{16} ") as raised:
        pack_content(B, blobs)
    assert "Fix: find the input" in str(raised.value)
    assert list(blobs.values()) == [A] and blobs == kept  # A's block kept as it was


def test_texts_that_do_not_collide_keep_their_blobs() -> None:
    blobs: dict[str, str] = {}
    packed = [pack_content(text, blobs) for text in (A, B, A)]
    assert [unpack_content(p, blobs, "w") for p in packed] == [A, B, A]
    assert packed[0] == packed[2] and len(blobs) >= 2
