"""cache.recordings_store: dvc with DVC's link cache types (`dvc config cache.type symlink`, `hardlink`).

DVC checks a cached out's files out as its cache type says: a copy (or reflink), a hard link to the
cache's file, or a symbolic link into the cache. A recording checked out as a link into the
project's own DVC cache is read like a file (its bytes verified against dvc.lock as any file's);
a link anywhere else is refused as before; and no writer writes through such a link, or a hard
link's other name, into DVC's cache: the file is replaced by a new one (pipeline.llm.recordings.dvc_links).

Real DVC in temporary projects: `dvc add` checks a recording out with each cache type, and the
paper's chain runs end to end (repro, replay, status, audit, cache gc, check, a rerun that records
more, push, a fresh clone, pull, replay) with each.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline.errors import LockMismatchError, UnsafeNameError
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.recordings import (
    dvc_links,
    folder_scan,
    item_table,
    key_reader,
    stage_folders,
    stage_reader,
    stage_writer,
)
from pipeline.llm.recordings.pins import Pins
from pipeline.llm.recordings.stage_index import index_stage
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import CallContext
from tests.helpers import request
from tests.test_recordings import _calls as transcript_calls
from tests.test_recordings_remote import CHAIN, COMPARED, _dvc, _judgeloop, _project, _run

CALLS = stage_folders.CALLS_FILE


def _calls(n: int, salt: str = "") -> list[RecordedCall]:
    fake = FakeBackend()
    calls = []
    for i in range(n):
        req = request(f"Judge metric {i}{salt}.\nHere is the transcript: line {i} about sleep and work.")
        record = CallRecord.new(fake.identity(), req, fake.chat(req))
        context = CallContext(stage="judge", item=f"{900 + i}", step=0)
        calls.append(RecordedCall(context=context, record=record))
    return calls


def _keys(calls: list[RecordedCall]) -> list[str]:
    return sorted(call.record.key for call in calls)


def _dvc_project(folder: Path, cache_type: str) -> Path:
    folder.mkdir(parents=True)
    _dvc(folder, "init", "--no-scm", "-q")
    _dvc(folder, "config", "cache.type", cache_type)
    return folder


def _added(project: Path, calls: list[RecordedCall]) -> Path:
    """recordings/judge written, then DVC-cached and checked out by `dvc add` with the project's type."""
    directory = project / "recordings" / "judge"
    stage_writer.write_stage(directory, calls)
    _dvc(project, "add", "-q", "recordings/judge")
    return directory


def _cache_objects(project: Path) -> dict[Path, bytes]:
    """Every file DVC stored in the project's cache, by path: its bytes (each must hash to its name)."""
    found = {path: path.read_bytes() for path in (project / ".dvc" / "cache").rglob("*") if path.is_file()}
    for path, data in found.items():
        name = path.parent.name + path.name
        if not name.endswith(".dir"):
            assert hashlib.md5(data).hexdigest() == name, f"{path}: DVC's cache changed"
    return found


@pytest.mark.parametrize("cache_type", ["symlink", "hardlink", "copy"])
def test_a_recording_dvc_checked_out_as_links_is_read_as_files(tmp_path: Path, cache_type: str) -> None:
    project = _dvc_project(tmp_path / "project", cache_type)
    calls = _calls(5)
    directory = _added(project, calls)
    status = os.lstat(directory / CALLS)
    links = {"symlink": (True, 1), "hardlink": (False, 2), "copy": (False, 1)}[cache_type]
    assert (os.path.islink(directory / CALLS), os.stat(directory / CALLS).st_nlink) == links, status
    assert _keys([loaded.call for loaded in stage_reader.read_stage(directory)]) == _keys(calls)
    scanned = folder_scan.scan_folder(directory)
    assert len(scanned.calls) == len(calls)
    scanned.calls.files.close()


@pytest.mark.usefixtures("small_threshold")
@pytest.mark.parametrize("cache_type", ["symlink", "hardlink"])
def test_a_sharded_recording_checked_out_as_links_is_read_by_key_by_item_and_whole(
    tmp_path: Path, cache_type: str
) -> None:
    project = _dvc_project(tmp_path / "project", cache_type)
    calls = _calls(40)
    directory = _added(project, calls)
    assert len([name for name in os.listdir(directory) if name.startswith("calls-")]) > 1  # sharded
    assert all(
        os.path.islink(directory / name) == (cache_type == "symlink") for name in os.listdir(directory)
    )
    assert _keys([loaded.call for loaded in stage_reader.read_stage(directory)]) == _keys(calls)
    wanted = calls[17]
    assert [loaded.call for loaded in key_reader.read_keys(directory, {wanted.record.key})] == [wanted]
    by_item = item_table.tabled_items(directory, {wanted.context.item})
    assert by_item is not None  # through the tables, not read whole
    assert [loaded.call for loaded in by_item] == [wanted]
    scanned = folder_scan.scan_folder(directory)
    assert len(scanned.calls) == len(calls)
    scanned.calls.files.close()


@pytest.mark.parametrize("cache_type", ["symlink", "hardlink"])
def test_a_replay_of_every_call_as_read_leaves_dvc_s_link_in_place(tmp_path: Path, cache_type: str) -> None:
    """pipeline.llm.recordings.unchanged: the file a replay would write again is the one read, so
    the link DVC checked out stays (not a new file DVC must link again)."""
    project = _dvc_project(tmp_path / "project", cache_type)
    calls = _calls(6)
    directory = _added(project, calls)
    before = (os.readlink(directory / CALLS) if cache_type == "symlink" else "", os.lstat(directory / CALLS))
    index = index_stage(directory)
    recording = stage_writer.StageRecording()
    for call in calls:
        recording.add(RecordedCall(context=call.context, record=call.record, cache_hit=True), recorded=index)
    recording.write(directory)
    after = (os.readlink(directory / CALLS) if cache_type == "symlink" else "", os.lstat(directory / CALLS))
    assert (after[0], after[1].st_ino, after[1].st_nlink) == (before[0], before[1].st_ino, before[1].st_nlink)


@pytest.mark.usefixtures("small_threshold")
def test_a_sharded_recording_s_blocks_are_found_in_place_through_dvc_s_links(
    tmp_path: Path, whole_reads: list[str]
) -> None:
    project = _dvc_project(tmp_path / "project", "symlink")
    calls = transcript_calls(40)  # a transcript in every prompt: a block the call's line refers to
    directory = _added(project, calls)
    assert [name for name in os.listdir(directory) if name.startswith("blocks-")]
    wanted = calls[17]
    assert [loaded.call for loaded in key_reader.read_keys(directory, {wanted.record.key})] == [wanted]
    assert not [name for name in whole_reads if name.startswith("blocks-")]  # found by bisecting


@pytest.mark.parametrize("cache_type", ["symlink", "hardlink"])
def test_a_rewrite_replaces_the_link_and_leaves_dvc_s_cache_as_it_was(
    tmp_path: Path, cache_type: str
) -> None:
    project = _dvc_project(tmp_path / "project", cache_type)
    directory = _added(project, _calls(5))
    cached = _cache_objects(project)
    more = _calls(7, salt=" again")
    stage_writer.write_stage(directory, more)
    assert _cache_objects(project) == cached  # never written through the link, nor the hard link
    replaced = os.lstat(directory / CALLS)
    assert not os.path.islink(directory / CALLS) and replaced.st_nlink == 1
    assert _keys([loaded.call for loaded in stage_reader.read_stage(directory)]) == _keys(more)
    # keep=: the calls already recorded are read through the link and kept beside the new ones
    _dvc(project, "add", "-q", "recordings/judge")  # DVC links the new file again
    stage_writer.write_stage(directory, _calls(2, salt=" third"), keep=lambda call: True)
    assert _cache_objects(project).items() >= cached.items()
    assert len(list(stage_reader.read_stage(directory))) == 9


def test_a_link_anywhere_but_dvc_s_own_cache_is_still_refused(tmp_path: Path) -> None:
    project = _dvc_project(tmp_path / "project", "symlink")
    directory = _added(project, _calls(3))
    target = os.path.realpath(directory / CALLS)
    assert dvc_links.cache_file(directory / CALLS) == target
    elsewhere = tmp_path / "elsewhere.jsonl"  # the same bytes, outside the cache
    shutil.copyfile(target, elsewhere)
    not_an_object = project / ".dvc" / "cache" / "calls.jsonl"  # in the cache folder, not a DVC object
    shutil.copyfile(target, not_an_object)
    other = _dvc_project(tmp_path / "other", "symlink")  # another project's cache
    _added(other, _calls(3))
    theirs = os.path.realpath(other / "recordings" / "judge" / CALLS)
    before = {path: path.read_bytes() for path in (elsewhere, not_an_object, Path(theirs))}
    for wrong in (elsewhere, not_an_object, Path(theirs)):
        (directory / CALLS).unlink()
        (directory / CALLS).symlink_to(wrong)
        with pytest.raises(UnsafeNameError, match=r"calls\.jsonl: a symbolic link"):
            list(stage_reader.read_stage(directory))
        with pytest.raises(UnsafeNameError, match=r"calls\.jsonl: a symbolic link"):
            folder_scan.scan_folder(directory)
        with pytest.raises(UnsafeNameError, match=r"calls\.jsonl: a symbolic link"):
            stage_writer.write_stage(directory, _calls(1))
        assert dvc_links.cache_file(directory / CALLS) is None
    assert {path: path.read_bytes() for path in before} == before  # nothing was written through them


def test_outside_a_dvc_project_every_link_is_refused(tmp_path: Path) -> None:
    directory = tmp_path / "recordings" / "judge"
    stage_writer.write_stage(directory, _calls(2))
    moved = tmp_path / "files" / "md5" / "ab" / ("c" * 30)  # named as DVC names its files
    moved.parent.mkdir(parents=True)
    (directory / CALLS).rename(moved)
    (directory / CALLS).symlink_to(moved)
    with pytest.raises(UnsafeNameError, match=r"a symbolic link"):
        list(stage_reader.read_stage(directory))


def test_a_cache_dir_outside_the_project_is_the_one_dvc_uses(tmp_path: Path) -> None:
    project = _dvc_project(tmp_path / "project", "symlink")
    _dvc(project, "cache", "dir", "../shared-cache")  # relative in .dvc/config: resolved from .dvc
    said = _dvc(project, "cache", "dir").stdout.strip()
    directory = _added(project, _calls(4))
    target = os.path.realpath(directory / CALLS)
    assert target.startswith(os.path.realpath(said) + os.sep)
    assert not target.startswith(str(project.resolve()))
    assert _keys([loaded.call for loaded in stage_reader.read_stage(directory)]) == _keys(_calls(4))
    # the default .dvc/cache is not DVC's cache once cache.dir names another
    local = project / ".dvc" / "cache" / "files" / "md5" / target[-33:-31] / target[-30:]
    local.parent.mkdir(parents=True)
    shutil.copyfile(target, local)
    (directory / CALLS).unlink()
    (directory / CALLS).symlink_to(local)
    with pytest.raises(UnsafeNameError, match=r"a symbolic link"):
        list(stage_reader.read_stage(directory))


def test_a_link_into_the_cache_is_still_held_to_the_folder_s_pin(tmp_path: Path) -> None:
    """The trust rests on the bytes: a link to another object of DVC's cache is read, hashed, and
    refused for not matching dvc.lock's pin of the folder."""
    project = _dvc_project(tmp_path / "project", "symlink")
    directory = _added(project, _calls(3))
    pinned = yaml.safe_load((project / "recordings" / "judge.dvc").read_text())["outs"][0]["md5"]
    lock = {"schema": "2.0", "stages": {"judge": {"outs": [{"path": "recordings/judge", "md5": pinned}]}}}
    (project / "dvc.lock").write_text(yaml.safe_dump(lock), encoding="utf-8")
    pins = Pins(project, project / "recordings")
    folder_scan.scan_folder(directory, pins).calls.files.close()  # as pinned
    _added(project, _calls(4, salt=" other"))  # the link now leads to another object of the cache
    assert (directory / CALLS).is_symlink()
    with pytest.raises(LockMismatchError, match=r"recordings/judge does not match its entry in dvc\.lock"):
        folder_scan.scan_folder(directory, Pins(project, project / "recordings"))


# The paper's chain end to end, with each cache type (the control: copy).


def _layout(project: Path, cache_type: str) -> None:
    calls = project / "recordings" / "judge" / CALLS
    if cache_type == "symlink":
        assert calls.is_symlink() and dvc_links.cache_file(calls) is not None
    else:
        assert not calls.is_symlink() and calls.stat().st_nlink == (2 if cache_type == "hardlink" else 1)


@pytest.mark.slow
@pytest.mark.parametrize("cache_type", ["symlink", "hardlink", "copy"])
def test_the_paper_s_chain_records_replays_and_travels_with_each_cache_type(
    tmp_path: Path, cache_type: str
) -> None:
    project = _project(tmp_path, str(tmp_path / "remote"), {})
    _dvc(project, "config", "cache.type", cache_type)  # .dvc/config: committed, so the clone has it
    _judgeloop(project, "repro", CHAIN)
    _layout(project, cache_type)
    replay = _judgeloop(project, "repro", "--replay", CHAIN)
    assert "0 misses sent to the model (cache mode replay)" in replay.stderr
    status = _judgeloop(project, "status", "--all", "--design", "paper").stdout
    assert "8 calls: 8 recorded, 0 to the model (exact)" in status
    assert "an offline replay will succeed" in status
    assert "record      verifies" in _judgeloop(project, "audit", "--stage", "judge", "--limit", "1").stdout
    assert re.search(r"judge\s+8 calls, 8 unique keys", _judgeloop(project, "cache", "stats").stdout)
    assert "would delete 0 of 30 local entries" in _judgeloop(project, "cache", "gc", "--dry-run").stdout
    assert "every stage reproduces dvc.lock" in _judgeloop(project, "check", "paper").stdout
    cached = _cache_objects(project)

    params = yaml.safe_load((project / "params.yaml").read_text())
    params["data"]["limit"] = 3  # one item more: every stage's recording is written again
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    _judgeloop(project, "repro", CHAIN)
    assert _cache_objects(project).items() >= cached.items()  # nothing written into DVC's cache
    _layout(project, cache_type)
    recorded = {name: (project / name).read_bytes() for name in COMPARED}

    _run(["git", "add", "-A"], project)
    _run(["git", "commit", "-qm", "recorded, recordings in DVC"], project)
    _dvc(project, "push")
    clone = tmp_path / "clone"
    _run(["git", "clone", "-q", str(project), str(clone)], tmp_path)
    _dvc(clone, "pull", "--with-deps", CHAIN)
    _layout(clone, cache_type)
    replay = _judgeloop(clone, "repro", "--replay", CHAIN)
    assert "0 misses sent to the model (cache mode replay)" in replay.stderr
    assert {name: (clone / name).read_bytes() for name in COMPARED} == recorded
    assert _run(["git", "status", "--porcelain"], clone).stdout == ""
    _layout(clone, cache_type)
    if cache_type == "symlink":  # DVC's cache loses the file (`dvc gc`): said plainly, no traceback
        os.unlink(os.path.realpath(clone / "recordings" / "judge" / CALLS))
        said = _judgeloop(clone, "status", "--design", "paper")
        assert "recordings/judge/calls.jsonl: a link whose file is gone" in said.stdout
        assert "`dvc pull` brings them" in said.stderr


def test_the_cache_dir_read_is_the_one_dvc_cache_dir_says(tmp_path: Path) -> None:
    project = _dvc_project(tmp_path / "project", "symlink")
    said = subprocess.run(
        [sys.executable, "-m", "dvc", "cache", "dir"], cwd=project, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert dvc_links._cache_dir(str(project.resolve() / "recordings")) == os.path.realpath(said)
