"""review12, of the skip for sharded recordings (pipeline.llm.recordings.unchanged, from shard-keep):
a sharded recording DVC checked out as links into its cache is left in place, every link kept, and
is byte for byte what a write gives; a link into anywhere else is refused, never left; and what the
skip drops afterwards it decides from the verified manifest, reading no more of a recording of one
file than its opening."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pipeline.errors import UnsafeNameError
from pipeline.llm.recordings import shards, stage_folders, stage_writer, unchanged
from pipeline.llm.recordings.stage_index import index_stage
from pipeline.llm.records import RecordedCall
from tests.test_recordings import _calls as transcript_calls
from tests.test_recordings_dvc_links import _added, _cache_objects, _dvc_project

CALLS = stage_folders.CALLS_FILE


def _links(directory: Path) -> dict[str, tuple[str, int, int]]:
    """Each entry of the folder: where its link leads ("" for a file), its inode, its link count."""
    return {
        name: (
            os.readlink(directory / name) if os.path.islink(directory / name) else "",
            os.lstat(directory / name).st_ino,
            os.lstat(directory / name).st_nlink,
        )
        for name in sorted(os.listdir(directory))
    }


def _contents(directory: Path) -> dict[str, bytes]:
    return {name: (directory / name).read_bytes() for name in sorted(os.listdir(directory))}


def _replay(directory: Path, calls: list[RecordedCall]) -> None:
    index = index_stage(directory)
    recording = stage_writer.StageRecording()
    for call in calls:
        recording.add(RecordedCall(context=call.context, record=call.record, cache_hit=True), recorded=index)
    recording.write(directory)


@pytest.mark.usefixtures("small_threshold")
@pytest.mark.parametrize("cache_type", ["symlink", "hardlink"])
def test_a_sharded_recording_dvc_checked_out_as_links_is_left_with_every_link(
    tmp_path: Path, cache_type: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = _dvc_project(tmp_path / "project", cache_type)
    calls = transcript_calls(40)  # blocks too: calls, blocks and items shards, each a link
    directory = _added(project, calls)
    assert shards.is_manifest((directory / CALLS).read_text())
    assert {name.split("-")[0] for name in os.listdir(directory)} >= {"calls", "blocks", "items"}
    cached, before, contents = _cache_objects(project), _links(directory), _contents(directory)
    _replay(directory, calls)
    assert _links(directory) == before  # every link (or hard link) DVC made stays
    assert _cache_objects(project) == cached
    forced = tmp_path / "forced"
    shutil.copytree(directory, forced, symlinks=False)  # the same bytes as files
    monkeypatch.setattr(unchanged, "unchanged_file", lambda *_, **__: False)
    _replay(forced, calls)
    assert _contents(forced) == contents == _contents(directory)


@pytest.mark.usefixtures("small_threshold")
@pytest.mark.parametrize("kind", ["calls", "blocks", "items"])
def test_a_shard_linked_out_of_dvc_s_cache_after_the_read_is_refused_not_left(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = _dvc_project(tmp_path / "project", "symlink")
    calls = transcript_calls(40)
    directory = _added(project, calls)
    index = index_stage(directory)
    name = next(name for name in sorted(os.listdir(directory)) if name.startswith(f"{kind}-"))
    elsewhere = tmp_path / "elsewhere.jsonl"  # the same bytes, outside DVC's cache
    shutil.copyfile(directory / name, elsewhere)
    (directory / name).unlink()
    (directory / name).symlink_to(elsewhere)
    recording = stage_writer.StageRecording()
    for call in calls:
        recording.add(RecordedCall(context=call.context, record=call.record, cache_hit=True), recorded=index)
    with pytest.raises(UnsafeNameError, match="a symbolic link"):
        recording.write(directory)
    # Had the link come after the writer's check of the folder, the skip does not leave it either.
    seen: list[bool] = []
    decide = unchanged.unchanged_file

    def decided(*args: object, **kwargs: object) -> bool:
        seen.append(decide(*args, **kwargs))  # type: ignore[arg-type]
        return seen[-1]

    monkeypatch.setattr(unchanged, "unchanged_file", decided)
    monkeypatch.setattr(stage_writer, "refuse_linked", lambda directory: None)
    recording.write(directory)
    assert seen == [False]


def test_a_recording_of_one_file_left_is_not_read_whole_to_drop_strays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a recording is left in place, which shard files it names is read from its opening (one
    file names none); before, the whole file was read and decoded again (about 56 ms CPU for a 32 MB
    recording of 4,064 calls, as much as the decision itself)."""
    calls = transcript_calls(6)
    directory = tmp_path / "judge"
    stage_writer.write_stage(directory, calls)
    stray = directory / "calls-3-0123456789abcdef.jsonl"
    index = index_stage(directory)
    stray.write_bytes(b"left by someone\n")  # after the read: the scan would refuse it
    read: list[Path] = []
    real = Path.read_bytes

    def counted(path: Path) -> bytes:
        read.append(path)
        return real(path)

    monkeypatch.setattr(Path, "read_bytes", counted)
    inode = (directory / CALLS).stat().st_ino
    recording = stage_writer.StageRecording()
    for call in calls:
        recording.add(RecordedCall(context=call.context, record=call.record, cache_hit=True), recorded=index)
    recording.write(directory)
    assert (directory / CALLS).stat().st_ino == inode  # left in place
    assert not stray.exists()  # dropped, as a write drops it
    assert directory / CALLS not in read


@pytest.mark.usefixtures("small_threshold")
@pytest.mark.parametrize("held", [unchanged.WHERES_HELD, 0])
def test_a_session_serving_keys_asked_again_in_later_rounds_leaves_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, held: int
) -> None:
    """serve-adopted's keep (serve by key) and chat, mixed, over a sharded recording where a key is
    recorded in several contexts (a prompt asked again in a later round: a line each), with the
    Wheres held or (past WHERES_HELD) read back from the lines: the folder is left, and is a write's."""
    from tests.helpers import make_session

    monkeypatch.setattr(unchanged, "WHERES_HELD", held)
    first = transcript_calls(30)
    again = [
        RecordedCall(context=call.context.model_copy(update={"step": 90 + at}), record=call.record)
        for at, call in enumerate(first[::4])
    ]
    calls = first + again
    (tmp_path / "recordings").mkdir()
    directory = tmp_path / "recordings" / "judge"
    stage_writer.write_stage(directory, calls)
    fresh = tmp_path / "fresh"
    stage_writer.write_stage(fresh, list(reversed(calls)))
    before = _links(directory)
    session, backend = make_session(tmp_path, "replay")
    for at, call in enumerate(reversed(calls)):
        if at % 2:
            session.chat(call.record.request, call.context)
        else:  # as a stage adopting its dry run serves it
            session.serve(call.record.key, call.context)
    session.close()
    assert backend.calls == []
    assert _links(directory) == before
    assert _contents(directory) == _contents(fresh)


@pytest.mark.parametrize("calls_count", [6, 40])
@pytest.mark.parametrize("link", [False, True])
def test_a_legacy_blobs_file_put_there_after_the_read_goes_as_a_write_drops_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, calls_count: int, link: bool
) -> None:
    """A write deletes blobs.jsonl (an older layout's blocks); a folder left in place must not keep
    one that appeared after the read (one file or sharded; a file, or a link leading nowhere)."""
    monkeypatch.setattr(shards, "SHARD_AT", 8)
    calls = transcript_calls(calls_count)
    folders = {}
    for name in ("left", "forced"):
        directory = tmp_path / name / "judge"
        stage_writer.write_stage(directory, calls)
        index = index_stage(directory)
        legacy = directory / stage_folders.LEGACY_BLOBS_FILE
        if link:
            legacy.symlink_to(tmp_path / "nowhere.jsonl")
        else:
            legacy.write_bytes(b'{"blob":"0123456789abcdef","text":"x"}\n')
        with monkeypatch.context() as patch:
            if name == "forced":
                patch.setattr(unchanged, "unchanged_file", lambda *_, **__: False)
            patch.setattr(stage_writer, "refuse_linked", lambda directory: None)  # (as if it came later)
            recording = stage_writer.StageRecording()
            for call in calls:
                recording.add(
                    RecordedCall(context=call.context, record=call.record, cache_hit=True), recorded=index
                )
            recording.write(directory)
        folders[name] = sorted(os.listdir(directory))
    assert stage_folders.LEGACY_BLOBS_FILE not in folders["forced"]
    assert folders["left"] == folders["forced"]
