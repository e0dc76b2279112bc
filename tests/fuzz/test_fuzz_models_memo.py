"""Fuzzing the recordings' models memo reader (pipeline.llm.recordings.models_memo): any bytes in
`recording-models.json` (random, random text, or a real memo edited: models forged with the seal
kept, dropped or made under another key, a file's hashes forged), in a private memo, one others may
write, or a link. The property of tests/fuzz/support.py, and: the models answered are the
recording's (a verified recording, so never None, never another model); an answer given without
reading the recording comes only from a private memo holding a content entry sealed under this
user's key; and the memo left behind is never a link."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from pathlib import Path
from unittest import mock

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.llm import private_memo
from pipeline.llm.recordings import models_memo, stage_writer, verified_memo
from pipeline.llm.recordings.folder_scan import Models
from pipeline.llm.recordings.stage_index import index_stage
from pipeline.llm.recordings.verified_memo import VerifiedMemo
from tests.fuzz.support import MEMO_KINDS, clear_or_correct, fuzz, inputs, place_memo
from tests.test_recordings import _calls

_SETTLED = 2**62  # the clock past the racy window: the recording's files may be remembered


def _recording(sandbox: Path) -> tuple[Path, VerifiedMemo, Models, bytes]:
    """The stage's recording verified in full, its models, and the memo a settled read leaves."""
    directory, state = sandbox / "recordings" / "judge", sandbox / "state" / "verified"
    memo = VerifiedMemo(state)
    if not directory.exists():
        stage_writer.write_stage(directory, _calls(6))
        state.mkdir(parents=True, mode=0o700)
    models = frozenset(index_stage(directory, memo=memo).models)
    (state / models_memo.MEMO_NAME).unlink(missing_ok=True)
    with mock.patch.object(private_memo, "now_ns", lambda: _SETTLED):
        assert models_memo.models(directory, None, memo) == models
    return directory, memo, models, (state / models_memo.MEMO_NAME).read_bytes()


def _edits(real: bytes) -> list[bytes]:
    """The real memo with what it states forged: another model (seal kept, dropped, or made under
    another key), every file's sha256 replaced (seal kept)."""
    known = json.loads(real)
    other_key = b"k" * 32
    found = []
    for key, entry in known["models"].items():
        forged = [[b, n + "-other", d] for b, n, d in entry["models"]]
        body = orjson.dumps(["models", key, entry["order"], forged])
        for mark in (entry["seal"], None, hmac.new(other_key, body, hashlib.sha256).hexdigest()):
            edited = {**known, "models": {key: {**entry, "models": forged, "seal": mark}}}
            found.append(json.dumps(edited).encode())
    files = {m: "0" * 64 + v[64:] for m, v in known["files"].items()}
    found.append(json.dumps({**known, "files": files}).encode())
    return found + [json.dumps({**known, **odd}).encode() for odd in _ODD]


# Values json reads that the seal's own encoders refuse (review13): a seal or a key not ASCII (which
# hmac.compare_digest refuses to compare), a lone surrogate (which neither str.encode nor orjson
# writes), an integer past 64 bits and a nesting past orjson's 255 levels (which orjson refuses).
_DEEP: object = [[[]]]
for _ in range(300):
    _DEEP = [_DEEP]
_ODD: list[dict[str, object]] = [
    {"files": {"1|2|3|4|5": "a b \u00e9"}},
    {"files": {"1|2|3|4|\ud800": "a b c"}},
    {"files": {"1|2|3|4|5": "a \ud800 c"}},
    {"models": {"k": {"order": [], "models": [], "seal": "\u00e9"}}},
    {"models": {"\ud800": {"order": [], "models": [], "seal": "0"}}},
    {"models": {"k": {"order": ["\ud800"], "models": [], "seal": "0"}}},
    {"models": {"k": {"order": [], "models": [[10**30]], "seal": "0"}}},
    {"models": {"k": {"order": [], "models": _DEEP, "seal": "0"}}},
]


def _sealed_content(data: bytes) -> bool:
    """Whether the memo holds a content entry whose seal is this user's (computed here, not by the
    module under test)."""
    key = verified_memo._key()
    try:
        known = json.loads(data)
    except (ValueError, RecursionError):
        return False
    section = known.get("models") if isinstance(known, dict) else None
    for name, entry in (section or {}).items() if isinstance(section, dict) else ():
        if not isinstance(entry, dict) or key is None or not isinstance(entry.get("seal"), str):
            continue
        body = orjson.dumps(["models", name, entry.get("order"), entry.get("models")])
        if hmac.compare_digest(entry["seal"], hmac.new(key, body, hashlib.sha256).hexdigest()):
            return True
    return False


@fuzz
@given(kind=st.sampled_from(MEMO_KINDS), data=st.data())
def test_any_models_memo_answers_the_recording_s_own_models(
    sandbox: Path, kind: str, data: st.DataObject
) -> None:
    with mock.patch.dict(os.environ, {verified_memo.KEY_ENV: str(sandbox / "state" / "memo.key")}):
        verified_memo._key.cache_clear()
        try:
            _check(sandbox, kind, data)
        finally:
            verified_memo._key.cache_clear()


def _check(sandbox: Path, kind: str, data: st.DataObject) -> None:
    directory, memo, models, real = _recording(sandbox)
    seeds = [real, *_edits(real), b"[" * 5000, b'{"a":' * 5000 + b"1" + b"}" * 5000]
    written = data.draw(st.one_of(inputs(*seeds), st.sampled_from(seeds)))
    memo_file = sandbox / "state" / "verified" / models_memo.MEMO_NAME
    place_memo(memo_file, kind, written)
    reads: list[Path] = []
    real_read = models_memo.verified_models  # type: ignore[attr-defined]

    def counted(folder: Path, *args: object) -> object:
        reads.append(folder)
        return real_read(folder, *args)  # type: ignore[arg-type]

    with (
        mock.patch.object(private_memo, "now_ns", lambda: _SETTLED),
        mock.patch.object(models_memo, "verified_models", counted),
    ):
        found = clear_or_correct(lambda: models_memo.models(directory, None, memo))
    assert found == models, (kind, written[:200])
    if not reads:  # answered from the memo: only a private one, sealed under this user's key
        assert kind == "private" and _sealed_content(written), written[:200]
    assert not memo_file.is_symlink()


@pytest.mark.parametrize("odd", _ODD, ids=range(len(_ODD)))
def test_a_memo_of_values_the_seal_cannot_encode_is_no_memo(sandbox: Path, odd: dict[str, object]) -> None:
    """Each of _ODD, every time (the fuzz test draws them among others): refused as unsealed, never a
    TypeError or UnicodeEncodeError out of the replay's model identity."""
    with mock.patch.dict(os.environ, {verified_memo.KEY_ENV: str(sandbox / "state" / "memo.key")}):
        verified_memo._key.cache_clear()
        try:
            directory, memo, models, real = _recording(sandbox)
            memo_file = sandbox / "state" / "verified" / models_memo.MEMO_NAME
            place_memo(memo_file, "private", json.dumps({**json.loads(real), **odd}).encode())
            with mock.patch.object(private_memo, "now_ns", lambda: _SETTLED):
                assert models_memo.models(directory, None, memo) == models
        finally:
            verified_memo._key.cache_clear()
