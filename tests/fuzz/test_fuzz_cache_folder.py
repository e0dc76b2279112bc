"""Fuzzing the local cache as a folder (tests/fuzz/test_fuzz_records.py fuzzes one row's value):
its database files, value files and block store each edited, truncated, removed, replaced by a
folder (or a folder by a file), by a link to the same bytes outside, or joined by a look-alike
(another case, a trailing space or line break, a decomposed accent). The property of
tests/fuzz/support.py, and: a record the cache serves is one that verifies, under the key asked;
nothing is written outside the sandbox."""

from __future__ import annotations

import os
import shutil
import unicodedata
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from pipeline.llm.cache.store import CallStore
from pipeline.llm.records import CallRecord
from tests.fuzz.support import clear_or_correct, fuzz, inputs, only_inside
from tests.test_trust_links import big_record, big_request_record, record

RECORDS = [record("judge that"), record("and this one"), big_record(), big_request_record()]  # four keys


class Files(dict[str, bytes]):
    def __repr__(self) -> str:  # a failing example names its changes, not the cache's bytes
        return f"<the seed cache's {len(self)} files>"


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory) -> Files:
    """A cache holding a small record, a long reply (a value file) and a long request (a value file
    in the block store): each file's bytes by its path in the folder."""
    folder = tmp_path_factory.mktemp("seed-cache") / "cache"
    store = CallStore(folder)
    try:
        for each in RECORDS:
            store.put(each)
    finally:
        store.close()
    return Files(
        {
            path.relative_to(folder).as_posix(): path.read_bytes()
            for path in folder.rglob("*")
            if path.is_file()
        }
    )


def _lookalikes(name: str) -> list[str]:
    head, _, tail = name.rpartition("/")
    base = head + "/" if head else ""
    return [
        base + tail.upper(),
        base + tail + " ",
        base + tail + "\r",
        base + tail + "\u2028",
        base + unicodedata.normalize("NFD", "é") + tail,
    ]


def _write(folder: Path, outside: Path, name: str, data: bytes) -> None:
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)


def _as_folder(folder: Path, outside: Path, name: str) -> None:
    (folder / name).unlink()
    (folder / name).mkdir()


def _parent_as_file(folder: Path, outside: Path, name: str) -> None:
    parent = (folder / name).parent
    if parent != folder:
        shutil.rmtree(parent)
        parent.write_bytes(b"")


def _linked(folder: Path, outside: Path, name: str) -> None:
    copy = outside / name.replace("/", "_")
    copy.write_bytes((folder / name).read_bytes())
    (folder / name).unlink()
    (folder / name).symlink_to(copy)


def _removed(folder: Path, outside: Path, name: str) -> None:
    (folder / name).unlink()


def _truncated(folder: Path, outside: Path, name: str, size: int) -> None:
    os.truncate(folder / name, size)


Change = tuple[str, Callable[..., None], tuple[Any, ...]]


def _kind(name: str) -> str:
    kind = "a value file" if name.endswith(".val") else name.rpartition("/")[2]
    return f"blocks' {kind}" if name.startswith("blocks/") else kind


@st.composite
def attacks(draw: st.DrawFn, seed: Files) -> list[Change]:
    chosen: list[Change] = []
    for _ in range(draw(st.integers(1, 2))):
        name = draw(st.sampled_from(sorted(seed)))
        how = draw(st.sampled_from(["edit", "truncate", "remove", "folder", "parent", "link", "look-alike"]))
        if how == "edit":
            chosen.append((f"edit {_kind(name)}", _write, (name, draw(inputs(seed[name][:4096])))))
        elif how == "truncate":
            size = draw(st.integers(0, max(0, len(seed[name]) - 1)))
            chosen.append((f"truncate {_kind(name)}", _truncated, (name, size)))
        elif how == "look-alike":
            stray = draw(st.sampled_from(_lookalikes(name)))
            chosen.append((f"look-alike of {_kind(name)}", _write, (stray, seed[name])))
        else:
            change = {"remove": _removed, "folder": _as_folder, "parent": _parent_as_file, "link": _linked}
            chosen.append((f"{how} {_kind(name)}", change[how], (name,)))
    return chosen


def _served(read: Callable[[], Any], key: str) -> None:
    found = clear_or_correct(read)
    event(f"a read: {type(found).__name__}")
    if isinstance(found, CallRecord):
        assert found.problem() is None and found.key == key, f"served unverified: {found!r}"


@fuzz
@given(data=st.data())
def test_a_cache_folder(sandbox: Path, seed: Files, data: st.DataObject) -> None:
    folder, outside = sandbox / ".judgeloop" / "cache", sandbox / "outside"
    for path in (folder, outside):
        shutil.rmtree(path, ignore_errors=True)
    outside.mkdir()
    for name, content in seed.items():
        _write(folder, outside, name, content)
    for what, change, arguments in data.draw(attacks(seed)):
        event(what)
        try:
            change(folder, outside, *arguments)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError, FileExistsError):
            event("an earlier change took the file away")
    opened = clear_or_correct(lambda: CallStore(folder))
    event(f"opened: {type(opened).__name__}")
    if not isinstance(opened, CallStore):
        return
    try:
        for each in RECORDS:
            _served(partial(opened.get, each.key, each.request), each.key)  # a hit: the header alone
            _served(partial(opened.get, each.key), each.key)  # an audit: the request rebuilt too
            clear_or_correct(partial(opened.inspect, each.key))
        clear_or_correct(lambda: list(opened.keys()))
        clear_or_correct(lambda: opened.put(record("a new call after the damage")))
    finally:
        clear_or_correct(opened.close)
    only_inside(sandbox.parent, sandbox)


def test_the_seed_cache_serves_every_record(sandbox: Path, seed: Files) -> None:
    """The seed holds a value file in both stores (else the fuzzing would miss them)."""
    assert any(name.endswith(".val") and not name.startswith("blocks/") for name in seed)
    assert any(name.endswith(".val") and name.startswith("blocks/") for name in seed)
    folder = sandbox / "seed-check"
    for name, content in seed.items():
        _write(folder, folder, name, content)
    store = CallStore(folder)
    try:
        for each in RECORDS:
            served = store.get(each.key)
            assert served is not None and served.problem() is None
            assert (served.key, served.request, served.reply.text) == (
                each.key,
                each.request,
                each.reply.text,
            )
    finally:
        store.close()
