"""Fuzzing a sharded recording's readers (pipeline.llm.recordings.shards, item_table, block_places,
stage_index): its manifest, a shard of calls or of blocks, a table of items, each edited as it
lies (its hash in the manifest then fails) or edited and re-hashed as a forger would (renamed to its
new hash, the manifest updated), so that the parsers past the hash checks are reached; and the
folder itself made to look otherwise: a look-alike or stray file, a shard replaced by a folder or
by a link to the same bytes outside. The property of tests/fuzz/support.py, and two more: every
call served verified is one whose record verifies, and nothing is written outside the sandbox."""

from __future__ import annotations

import contextlib
import hashlib
import os
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from pipeline.errors import CorruptRecordError
from pipeline.llm.recordings import shards
from pipeline.llm.recordings.item_reader import read_items
from pipeline.llm.recordings.key_reader import read_keys
from pipeline.llm.recordings.stage_folders import CALLS_FILE, has_recording
from pipeline.llm.recordings.stage_index import index_stage
from pipeline.llm.recordings.stage_reader import read_stage, split_recording
from pipeline.llm.recordings.stage_writer import write_stage
from pipeline.llm.records import RecordedCall
from tests.fuzz.support import clear_or_correct, fuzz, inputs, keys_shown, laid_out, only_inside
from tests.test_recordings_shards import _calls

CALLS = _calls(24)
KEYS = sorted({call.record.key for call in CALLS})
ITEMS = {call.context.item for call in CALLS}


class Files(dict[str, bytes]):
    def __repr__(self) -> str:  # a failing example names its changes, not 90 kB of seed
        return f"<the seed's {len(self)} files>"


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """A stage's recording of 24 calls, sharded (past a threshold of 8): each file's bytes."""
    folder = tmp_path_factory.mktemp("sharded") / "judge"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(shards, "SHARD_AT", 8)
        write_stage(folder, CALLS)
    return Files({path.name: path.read_bytes() for path in sorted(folder.iterdir())})


def _kind(name: str) -> str:
    return "manifest" if name == CALLS_FILE else name.split("-")[0]


def _write(folder: Path, outside: Path, name: str, data: bytes) -> None:
    (folder / name).write_bytes(data)


def _rehashed(folder: Path, outside: Path, name: str, data: bytes) -> None:
    """`name`'s bytes replaced by `data`, renamed to their new hash, the manifest updated: a forger's
    edit that every hash in the folder agrees with (only dvc.lock's pin would tell)."""
    sha = hashlib.sha256(data).hexdigest()
    kind, digit, _ = name.split("-")
    new = f"{kind}-{digit}-{sha[:16]}.jsonl"
    (folder / name).unlink()
    (folder / new).write_bytes(data)
    manifest = folder / CALLS_FILE
    lines = []
    for line in manifest.read_bytes().split(b"\n"):
        try:  # an earlier draw may have made the manifest anything: its lines left as they are
            entry = orjson.loads(line) if line else None
        except orjson.JSONDecodeError:
            entry = None
        if isinstance(entry, dict) and entry.get("shard") == name:
            entry.update(sha256=sha, shard=new)
            line = orjson.dumps(entry, option=orjson.OPT_SORT_KEYS)
        lines.append(line)
    manifest.write_bytes(b"\n".join(lines))


def _as_folder(folder: Path, outside: Path, name: str) -> None:
    (folder / name).unlink()
    (folder / name).mkdir()
    (folder / name / name).write_bytes(b"")


def _linked(folder: Path, outside: Path, name: str) -> None:
    """The same bytes, as a link to a copy outside the folder."""
    copy = outside / name
    copy.write_bytes((folder / name).read_bytes())
    (folder / name).unlink()
    (folder / name).symlink_to(copy)


def _removed(folder: Path, outside: Path, name: str) -> None:
    (folder / name).unlink()


LOOKALIKES = [
    "Calls.jsonl",
    unicodedata.normalize("NFD", "cälls.jsonl"),
    f"{CALLS_FILE} ",
    f"{CALLS_FILE}\r",
    f"{CALLS_FILE}\u2028",
    f".{CALLS_FILE}",
    "calls-0-0123456789abcdef.jsonl",
    "CALLS-0-0123456789abcdef.jsonl",
    "calls-0-0123456789ABCDEF.jsonl",
    "items-f-ffffffffffffffff.jsonl",
    "blocks-1-0123456789abcdef.jsonl\n",
    "calls-\u0660-0123456789abcdef.jsonl",  # an Arabic-Indic zero: \d would take it, [0-9a-f] does not
]


Change = tuple[str, Callable[..., None], tuple[Any, ...]]


@st.composite
def attacks(draw: st.DrawFn, seed: dict[str, bytes]) -> list[Change]:
    """One to three changes to the folder: (its name for the statistics, the change, its arguments)."""
    names = sorted(seed)
    chosen: list[Change] = []
    for _ in range(draw(st.integers(1, 3))):
        name = draw(st.sampled_from(names))
        how = draw(st.sampled_from(["edit", "forge", "look-alike", "folder", "link", "remove"]))
        if how == "edit":
            chosen.append((f"edit {_kind(name)}", _write, (name, draw(inputs(seed[name])))))
        elif how == "forge" and name != CALLS_FILE:
            chosen.append((f"forge {_kind(name)}", _rehashed, (name, draw(inputs(seed[name])))))
        elif how == "look-alike":
            stray = draw(st.sampled_from(LOOKALIKES))
            data = draw(st.one_of(st.sampled_from(list(seed.values())), inputs(seed[name])))
            chosen.append(("look-alike", _write, (stray, data)))
        elif how == "folder":
            chosen.append((f"folder for {_kind(name)}", _as_folder, (name,)))
        elif how == "link":
            chosen.append((f"link for {_kind(name)}", _linked, (name,)))
        else:
            chosen.append((f"remove {_kind(name)}", _removed, (name,)))
    return chosen


def _verified(read: Callable[[], Any]) -> None:
    """`read` gives calls (or LoadedCalls, or None) or a clear error; every call given verifies."""
    found = clear_or_correct(read)
    if isinstance(found, list):
        for call in found:
            record = (call if isinstance(call, RecordedCall) else call.call).record if call else None
            assert record is None or record.problem() is None, f"served unverified: {record!r}"


@fuzz
@given(data=st.data())
def test_a_sharded_recording_folder(sandbox: Path, seed: dict[str, bytes], data: st.DataObject) -> None:
    folder = laid_out(sandbox / "recordings" / "judge", seed)
    outside = laid_out(sandbox / "outside", {})
    for what, change, arguments in data.draw(attacks(seed)):
        event(what)
        if os.path.lexists(folder / CALLS_FILE) or "look-alike" in what:
            # (an earlier change may have taken the file away already)
            with contextlib.suppress(
                FileNotFoundError, IsADirectoryError, NotADirectoryError, FileExistsError
            ):
                change(folder, outside, *arguments)
    _verified(lambda: list(read_stage(folder)))
    if has_recording(folder):  # its callers ask first (read_stage, read_items)
        clear_or_correct(lambda: split_recording(folder))
    _verified(lambda: [index.call(key) for index in [index_stage(folder)] for key in KEYS])
    keys_shown(folder)
    _verified(lambda: list(read_keys(folder, KEYS[:3])))
    _verified(lambda: list(read_keys(folder, KEYS[-2:])))
    clear_or_correct(lambda: list(read_items(folder, {"901", "", "9\u0660\u0661"})))  # audit: unverified
    only_inside(sandbox.parent, sandbox)


def test_the_seed_is_sharded_and_read_as_it_is(sandbox: Path, seed: dict[str, bytes]) -> None:
    """The seed is a sharded recording its readers accept (else the fuzzing would stop at once)."""
    assert {_kind(name) for name in seed} == {"manifest", "calls", "blocks", "items"}
    folder = sandbox / "recordings" / "seed"
    folder.mkdir(parents=True)
    for name, content in seed.items():
        (folder / name).write_bytes(content)
    assert len(list(read_stage(folder))) == len(CALLS)
    assert all(index_stage(folder).call(key) is not None for key in KEYS)
    assert len(list(read_items(folder, ITEMS))) == len(CALLS)


@pytest.mark.parametrize("kind", ["calls", "blocks", "items"])
def test_a_shard_replaced_by_a_folder_is_refused_naming_it(
    sandbox: Path, seed: dict[str, bytes], kind: str
) -> None:
    """Found by the fuzzing: a folder where a shard was opened for reading (os.open takes a
    folder), then IsADirectoryError at its first read, out of the index's scan and the bisecting
    block reader; now the shard is named as not a file."""
    folder = sandbox / "recordings" / f"folder-for-{kind}"
    folder.mkdir(parents=True)
    for name, content in seed.items():
        (folder / name).write_bytes(content)
    name = next(name for name in sorted(seed) if name.startswith(f"{kind}-"))
    _as_folder(folder, folder, name)
    if kind == "items":  # a table of items is audit's alone, which then reads the shards instead
        assert len(list(read_stage(folder))) == len(list(read_items(folder, ITEMS))) == len(CALLS)
        return
    for read in (
        lambda: index_stage(folder),
        lambda: list(read_stage(folder)),
        lambda: list(read_keys(folder, KEYS)),
        lambda: list(read_items(folder, ITEMS)),
    ):
        with pytest.raises(CorruptRecordError, match=rf"{name}"):
            read()
