"""Fuzzing the embedded model's hash memo reader (pipeline.llm.backends.hash_memo): any bytes in
`file-hashes.json` (random, random text, or a real memo edited), in a private memo, one others may
write, or a link. The property of tests/fuzz/support.py, and: the sha256 returned is the model
file's, unless the memo is private and states, as a JSON object, a well-formed sha256 for the file's
identity (the memo is the user's own record; a value of any other shape is read as no memo); and the
memo left behind holds the answer, so the next call gives the same."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from unittest import mock

from hypothesis import given
from hypothesis import strategies as st

from pipeline.llm import private_memo
from pipeline.llm.backends import hash_memo
from tests.fuzz.support import MEMO_KINDS, clear_or_correct, fuzz, inputs, place_memo

MODEL = b"GGUF" + bytes(range(256)) * 8
TRUE = hashlib.sha256(MODEL).hexdigest()
WRONG = "0" * 64
_SHA256 = re.compile(r"[0-9a-f]{64}", re.ASCII)


def _memo(identity: str, value: object) -> bytes:
    return json.dumps({"1|2|3|4|5": TRUE, identity: value}, indent=1).encode()


def _stated(data: bytes, identity: str) -> str | None:
    """The sha256 the memo states for `identity`: JSON (as json reads bytes: UTF-8, -16 or -32), one
    object (its last value for a repeated key), a string of exactly 64 lowercase hex digits."""
    try:
        found = json.loads(data)
    except (ValueError, RecursionError):
        return None
    value = found.get(identity) if isinstance(found, dict) else None
    return value if isinstance(value, str) and _SHA256.fullmatch(value) else None


@st.composite
def memos(draw: st.DrawFn, identity: str) -> bytes:
    """A memo: random bytes or text, or a memo for this very file (its sha256, a wrong one, or a value
    of another shape) with random edits."""
    near = [TRUE.upper(), TRUE[:-1], TRUE + "0", f" {TRUE}", f"{TRUE}\n", [TRUE], {"sha256": TRUE}, 1, None]
    seeds = [_memo(identity, TRUE), _memo(identity, WRONG), *(_memo(identity, v) for v in near)]
    seeds += [b"[" * 5000, b'{"a":' * 5000 + b"1" + b"}" * 5000]  # nested past json's recursion
    return draw(st.one_of(inputs(*seeds), st.sampled_from(seeds)))


@fuzz
@given(kind=st.sampled_from(MEMO_KINDS), data=st.data())
def test_any_memo_gives_the_model_s_sha256_or_what_the_private_memo_states(
    sandbox: Path, kind: str, data: st.DataObject
) -> None:
    model, cache = sandbox / "model.gguf", sandbox / "cache"
    if not model.exists():
        model.write_bytes(MODEL)
        cache.mkdir(mode=0o700)
    identity = hash_memo.identity(os.stat(model))
    written = data.draw(memos(identity))
    place_memo(cache / hash_memo.MEMO_NAME, kind, written)
    stated = _stated(written, identity) if kind == "private" else None

    settled = mock.patch.object(private_memo, "now_ns", lambda: 2**62)  # the model file is not racy
    with settled:
        found = clear_or_correct(lambda: hash_memo.file_sha256(model, cache))
    assert found == (stated or TRUE), (kind, written[:200])
    memo = cache / hash_memo.MEMO_NAME
    assert not memo.is_symlink() and json.loads(memo.read_bytes())[identity] == found  # the answer kept
    with settled:
        assert hash_memo.file_sha256(model, cache) == found
