"""An interview replaced in the folder while a stage runs (pipeline.data.transcript_open): after the
index was made (when its item runs), or after the folder was listed (while the index is made). A
link leading out, another file given the same size and time (os.utime), a file rewritten in place
with its old size and time, a folder or a pipe in its place: each is refused, naming the file and
the fix, and nothing outside the folder is read. The file is asked what it is through the
descriptor that reads it, never through a second look at its path."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

import pipeline.data.transcripts as transcripts
from pipeline.data.settings import DataSettings
from pipeline.data.transcript_places import Listed, listed
from pipeline.data.transcripts import Transcripts, index_transcripts
from pipeline.errors import InputError

_SECRET = "aws_secret_access_key"


def _folder(root: Path) -> Path:
    folder = root / "data"
    folder.mkdir()
    (folder / "300.txt").write_text("Ellie: hi\nParticipant: fine\n")
    (folder / "301.txt").write_text("Ellie: hello\nParticipant: good\n")
    return folder


def _outside(root: Path, like: Path) -> Path:
    """A file outside the folder, a transcript too, of `like`'s size and times (os.utime)."""
    text = f"Ellie: {_SECRET}"
    size = like.stat().st_size
    secret = root / "home" / ".aws" / "credentials"
    secret.parent.mkdir(parents=True)
    secret.write_text(text + "x" * (size - len(text) - 1) + "\n")
    assert secret.stat().st_size == size
    _same_times(secret, like)
    return secret


def _same_times(path: Path, like: Path) -> None:
    status = like.stat()
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns), follow_symlinks=False)


def _link_out(folder: Path) -> Path:
    entry = folder / "301.txt"
    secret = _outside(folder.parent, entry)
    entry.unlink()
    entry.symlink_to(secret)
    assert (entry.stat().st_size, entry.stat().st_mtime_ns) == (
        secret.stat().st_size,
        secret.stat().st_mtime_ns,
    )
    return secret


def _same_size_and_time(folder: Path) -> None:
    """Another file, its size and times those of the one it replaces (a rename over it)."""
    entry = folder / "301.txt"
    other = folder.parent / "other.txt"
    other.write_text("Ellie: hello\nParticipant: evil\n")
    _same_times(other, entry)
    other.replace(entry)


def _in_place(folder: Path) -> None:
    """The same file rewritten, its old size and times set back."""
    entry = folder / "301.txt"
    status = entry.stat()
    entry.write_text("Ellie: hello\nParticipant: evil\n")
    os.utime(entry, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert (entry.stat().st_size, entry.stat().st_mtime_ns) == (status.st_size, status.st_mtime_ns)


def _a_folder(folder: Path) -> None:
    (folder / "301.txt").unlink()
    (folder / "301.txt").mkdir()


def _a_pipe(folder: Path) -> None:
    (folder / "301.txt").unlink()
    os.mkfifo(folder / "301.txt")


def _gone(folder: Path) -> None:
    (folder / "301.txt").unlink()


_SWAPS: dict[str, tuple[Callable[[Path], object], str]] = {
    "a link leading out, of the same size and time": (_link_out, "replaced by another file"),
    "another file of the same size and time": (_same_size_and_time, "replaced by another file"),
    "the file rewritten, its size and time set back": (_in_place, "changed since it was read"),
    "a folder": (_a_folder, "now a folder"),
    "a pipe": (_a_pipe, "now a pipe"),
    "nothing": (_gone, "cannot be read now"),
}


@pytest.mark.parametrize("swap", sorted(_SWAPS))
def test_an_interview_swapped_after_the_index_was_made_is_refused_when_its_item_runs(
    tmp_path: Path, swap: str
) -> None:
    folder = _folder(tmp_path)
    index = index_transcripts(DataSettings(transcripts="data"), tmp_path)
    assert index.get("300").text.endswith("fine")
    swapped, said = _SWAPS[swap]
    swapped(folder)
    with pytest.raises(InputError) as refused:
        index.get("301")
    assert refused.value.path == "data/301.txt" and said in refused.value.problem
    assert "item '301'" in refused.value.problem and "while a stage runs" in refused.value.fix
    assert _SECRET not in refused.value.message
    assert index.get("300").text.endswith("fine")  # the others still read


def _swapped_after_listing(
    monkeypatch: pytest.MonkeyPatch, swap: Callable[[Path], object]
) -> Callable[[Path, Path], Listed]:
    def then_swapped(path: Path, root: Path) -> Listed:
        files = listed(path, root)
        swap(path)
        return files

    monkeypatch.setattr(transcripts, "listed", then_swapped)
    return then_swapped


_WHILE_INDEXED = {
    "a link leading out": (_link_out, "outside the folder"),
    "a folder": (_a_folder, "now a folder"),
    "a pipe": (_a_pipe, "now a pipe"),
    "nothing": (_gone, "cannot be read now"),
}


@pytest.mark.parametrize("swap", sorted(_WHILE_INDEXED))
def test_an_interview_swapped_after_the_folder_was_listed_is_refused_by_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swap: str
) -> None:
    """The listing refuses a link leading out (tests/test_transcript_names.py); one put in its
    place after the listing, before the index reads it, is refused by the read itself."""
    _folder(tmp_path)
    swapped, said = _WHILE_INDEXED[swap]
    _swapped_after_listing(monkeypatch, swapped)
    with pytest.raises(InputError) as refused:
        index_transcripts(DataSettings(transcripts="data"), tmp_path)
    assert refused.value.path == "data/301.txt" and said in refused.value.problem
    assert "since the folder was listed" in refused.value.problem
    assert _SECRET not in refused.value.message


def test_without_proc_a_link_leading_out_after_the_listing_is_still_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the kernel does not say where an open file lies (no /proc: macOS, Windows), the path's
    realpath is checked, and that it is the file the descriptor holds."""
    import pipeline.data.transcript_open as transcript_open

    _folder(tmp_path)
    monkeypatch.setattr(transcript_open, "_PROC_FD", f"{tmp_path}/no-proc/")
    _swapped_after_listing(monkeypatch, _link_out)
    with pytest.raises(InputError, match=r"^data/301\.txt: now leads to .*credentials, outside the folder"):
        index_transcripts(DataSettings(transcripts="data"), tmp_path)
    monkeypatch.undo()
    monkeypatch.setattr(transcript_open, "_PROC_FD", f"{tmp_path}/no-proc/")
    (tmp_path / "data" / "301.txt").unlink()
    (tmp_path / "data" / "302.txt").symlink_to("300.txt")  # a link inside is read, as it always was
    index = index_transcripts(DataSettings(transcripts="data"), tmp_path)
    assert index.ids == ["300", "302"] and index.get("302").text == index.get("300").text


def test_a_link_inside_and_the_folder_a_link_read_as_before_through_the_descriptor(tmp_path: Path) -> None:
    store = tmp_path / "mnt" / "interviews"
    store.mkdir(parents=True)
    (store / "300.txt").write_text("Ellie: hi\nParticipant: fine\n")
    (store / "301.txt").symlink_to("300.txt")
    (tmp_path / "data").symlink_to(store)
    index = index_transcripts(DataSettings(transcripts="data"), tmp_path)
    assert [t.text for t in index] == ["Ellie : hi\nParticipant : fine"] * 2


def test_a_jsonl_line_is_read_again_from_the_file_the_index_read(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    lines = b'{"id": "a", "text": "Ellie: one"}\n{"id": "b", "text": "Ellie: two"}\n'
    (folder / "x.jsonl").write_bytes(lines)
    index: Transcripts = index_transcripts(DataSettings(transcripts="data"), tmp_path)
    assert index.get("b").text == "Ellie : two"
    other = tmp_path / "other.jsonl"
    other.write_bytes(lines.replace(b"two", b"owt"))
    _same_times(other, folder / "x.jsonl")
    other.replace(folder / "x.jsonl")
    with pytest.raises(InputError, match=r"^data/x\.jsonl:2: .*replaced by another file"):
        index.get("b")


def test_without_proc_a_path_that_is_not_the_file_opened_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fallback's own race: the path's realpath, looked at after the open, is another file."""
    import pipeline.data.transcript_open as transcript_open

    folder = _folder(tmp_path)
    monkeypatch.setattr(transcript_open, "_PROC_FD", f"{tmp_path}/no-proc/")
    fd = os.open(folder / "300.txt", os.O_RDONLY)
    try:
        with pytest.raises(InputError, match=r"^data/301\.txt: it was replaced while it was opened"):
            transcript_open._refuse_outside(fd, folder / "301.txt", os.fstat(fd), str(folder), "data/301.txt")
        transcript_open._refuse_outside(fd, folder / "300.txt", os.fstat(fd), str(folder), "data/300.txt")
    finally:
        os.close(fd)


def test_an_interview_replaced_by_a_link_in_a_loop_is_refused_naming_it(tmp_path: Path) -> None:
    """An entry that cannot be opened for another reason than being gone (here a link to itself):
    a clear error naming the file, not an OSError's traceback."""
    folder = _folder(tmp_path)
    index = index_transcripts(DataSettings(transcripts="data"), tmp_path)
    (folder / "301.txt").unlink()
    (folder / "301.txt").symlink_to("301.txt")
    with pytest.raises(
        InputError, match=r"^data/301\.txt: cannot be read \(Too many levels of symbolic links\)"
    ):
        index.get("301")


def test_the_memo_remembers_what_the_bytes_it_hashed_hold_even_if_the_file_changes_while_indexed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The memo of checked files (pipeline.data.transcript_memo) is keyed by a file's bytes. Hashed
    from one read and parsed from another, a file rewritten between the two (its size and time set
    back) was remembered under the bytes it no longer held: an index of those bytes later was
    served another file's ids. One read now gives both."""
    import pipeline.data.transcript_memo as memo

    folder = tmp_path / "data"
    folder.mkdir()
    first = b'{"id": "x", "text": "Ellie: one"}\n{"id": "y", "text": "Ellie: two"}\n'
    other = first.replace(b'"x"', b'"p"').replace(b'"y"', b'"q"')
    entry = folder / "a.jsonl"
    entry.write_bytes(first)
    status = entry.stat()

    def rewritten(content: bytes) -> None:
        entry.write_bytes(content)
        os.utime(entry, ns=(status.st_atime_ns, status.st_mtime_ns))

    checked = memo.checked_transcripts

    def changed_while_indexed(*args: object, **kwargs: object) -> object:
        rewritten(other)  # after the memo's hash of the file, before its parse
        return checked(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(memo, "checked", {})
    monkeypatch.setattr(memo, "checked_transcripts", changed_while_indexed)
    settings = DataSettings(transcripts="data")
    assert index_transcripts(settings, tmp_path).ids == ["x", "y"]  # the bytes hashed, as parsed
    monkeypatch.setattr(memo, "checked_transcripts", checked)
    rewritten(first)
    assert index_transcripts(settings, tmp_path).ids == ["x", "y"]  # from the memo: what those bytes hold


@pytest.mark.parametrize("when", ["while indexed", "when its item runs"])
def test_an_interview_written_while_it_is_read_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    """Its identity is asked of the descriptor before the read and again after: bytes read while a
    writer was at work on the file (here, between the look and the read) are refused, not used,
    neither indexed nor parsed as the item's."""
    import pipeline.data.transcript_open as transcript_open

    folder = _folder(tmp_path)
    settings = DataSettings(transcripts="data")
    index = None if when == "while indexed" else index_transcripts(settings, tmp_path)
    read = transcript_open._read

    def written_meanwhile(fd: int, size: int) -> bytes:
        if os.readlink(f"/proc/self/fd/{fd}").endswith("301.txt"):
            entry = folder / "301.txt"
            with entry.open("r+b") as writer:  # rewritten in place, its size kept
                writer.write(b"Ellie: howdy")
            os.utime(entry, ns=(10**9, 10**9))  # a time of its own, whatever the clock's tick
        return read(fd, size)

    if not Path("/proc/self/fd").is_dir():
        pytest.skip("no /proc to tell which file a descriptor holds")
    monkeypatch.setattr(transcript_open, "_read", written_meanwhile)
    with pytest.raises(InputError, match=r"^data/301\.txt: the file changed while it was read"):
        (index or index_transcripts(settings, tmp_path)).get("301")
