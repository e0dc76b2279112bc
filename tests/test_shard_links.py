"""A shard written where a file of its name already stands (pipeline.llm.recordings.shards.write_shard):
the file is kept only when it is a regular file of the same bytes. A symbolic link is never the file
of that name, wherever it leads and whatever it holds: it is replaced by the shard itself, and what it
led to is left as it was."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from pipeline.llm.recordings.shards import write_shard

DATA = b'{"checksum":"x"}\n'
NAME = f"calls-0-{hashlib.sha256(DATA).hexdigest()[:16]}.jsonl"


@pytest.mark.parametrize("leads", ["outside", "inside", "dangling"])
def test_a_link_of_the_same_bytes_at_a_shard_s_name_is_replaced(tmp_path: Path, leads: str) -> None:
    folder = tmp_path / "recordings" / "judge"
    folder.mkdir(parents=True)
    places = {"outside": tmp_path / "elsewhere", "inside": folder / "a-copy", "dangling": tmp_path / "gone"}
    target = places[leads]
    if leads != "dangling":
        target.write_bytes(DATA)
    (folder / NAME).symlink_to(target)
    assert write_shard(folder, "calls", "0", [DATA]) == (NAME, hashlib.sha256(DATA).hexdigest())
    assert not (folder / NAME).is_symlink()
    assert (folder / NAME).read_bytes() == DATA
    if leads != "dangling":
        assert target.read_bytes() == DATA  # what the link led to: not written, not removed
    assert not [n for n in os.listdir(folder) if n.endswith(".tmp") and not n.startswith(".shards-writing")]


def test_a_regular_file_of_the_same_bytes_is_kept(tmp_path: Path) -> None:
    folder = tmp_path / "judge"
    folder.mkdir()
    (folder / NAME).write_bytes(DATA)
    before = os.stat(folder / NAME)
    write_shard(folder, "calls", "0", [DATA])
    assert os.path.samestat(before, os.stat(folder / NAME))  # the same file, not written again
    assert os.listdir(folder) == [NAME]


def test_a_folder_at_a_shard_s_name_is_refused_naming_it_and_nothing_is_left_open(tmp_path: Path) -> None:
    """review16: a folder at the shard's name (a name anyone can foresee: the content's hash) made
    `_hash_of` wrap a folder's descriptor in open(), which raised IsADirectoryError naming the
    descriptor ("Is a directory: 4") and left it open; it is refused, naming the folder and the fix,
    with no descriptor and no temporary file left."""
    from pipeline.errors import CorruptRecordError

    folder = tmp_path / "judge"
    (folder / NAME).mkdir(parents=True)
    fds = len(os.listdir("/proc/self/fd"))
    with pytest.raises(CorruptRecordError) as refused:
        write_shard(folder, "calls", "0", [DATA])
    assert f"{folder / NAME}: a folder at a shard's name" in str(refused.value)
    assert len(os.listdir("/proc/self/fd")) == fds
    assert os.listdir(folder) == [NAME]  # refused before the journal names it, the temporary file gone
