"""The interviews' names in messages, made without a realpath an interview (issue 33: the real export's
growth per 10x calls): each is the name shown_path gives, in every layout (links to files and
folders inside the folder, the folder itself a link into or out of the project, the folder the
project or one above it), and indexing N plain interviews resolves a constant number of paths."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline.data.input_files import shown_path
from pipeline.data.settings import DataSettings
from pipeline.data.transcripts import index_transcripts

DAIC = "start_time\tstop_time\tspeaker\tvalue\n1\t2\tEllie\thi\n2\t3\tParticipant\tfine\n"


def _daic(folder: Path, item: int) -> None:
    (folder / f"{item}_P").mkdir(parents=True)
    (folder / f"{item}_P" / f"{item}_TRANSCRIPT.csv").write_text(DAIC)


def _interviews(folder: Path) -> None:
    """DAIC folders, a flat DAIC file, a text file, a JSONL file of two, and links inside the folder
    to a file and to a folder (a link that stays inside is read)."""
    for item in (300, 301):
        _daic(folder, item)
    (folder / "302_TRANSCRIPT.csv").write_text(DAIC)
    (folder / "b.txt").write_text("Ellie: hi\nParticipant: ok\n")
    (folder / "more.jsonl").write_text('{"id": "7", "text": "Ellie: a"}\n{"id": "8", "text": "Ellie: b"}\n')
    (folder / "store").mkdir()
    (folder / "store" / "kept.csv").write_text(DAIC)
    os.symlink("store/kept.csv", folder / "400_TRANSCRIPT.csv")
    _daic(folder / "store", 500)
    os.symlink("store/500_P", folder / "500_P")


def _plain(tmp: Path) -> tuple[Path, str]:
    _interviews(tmp / "proj" / "data")
    return tmp / "proj", "data"


def _linked_inside(tmp: Path) -> tuple[Path, str]:
    _interviews(tmp / "proj" / "kept" / "daic")
    os.symlink("kept/daic", tmp / "proj" / "data")
    return tmp / "proj", "data"


def _linked_outside(tmp: Path) -> tuple[Path, str]:
    _interviews(tmp / "mnt" / "daic")
    (tmp / "proj").mkdir()
    os.symlink(tmp / "mnt" / "daic", tmp / "proj" / "data")
    return tmp / "proj", "data"


def _absolute_outside(tmp: Path) -> tuple[Path, str]:
    _interviews(tmp / "mnt" / "daic")
    (tmp / "proj").mkdir()
    return tmp / "proj", str(tmp / "mnt" / "daic")


def _the_project(tmp: Path) -> tuple[Path, str]:
    _interviews(tmp / "proj")
    return tmp / "proj", "."


def _above_the_project(tmp: Path) -> tuple[Path, str]:
    """The folder holds the project: an interview nested in the project's own folder is named from it."""
    (tmp / "proj").mkdir()
    (tmp / "proj" / "9_TRANSCRIPT.csv").write_text(DAIC)
    (tmp / "a.txt").write_text("Ellie: hi\n")
    return tmp / "proj", ".."


LAYOUTS: list[Callable[[Path], tuple[Path, str]]] = [
    _plain,
    _linked_inside,
    _linked_outside,
    _absolute_outside,
    _the_project,
    _above_the_project,
]


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda layout: layout.__name__.strip("_"))
def test_each_interview_is_named_as_shown_path_names_it(
    tmp_path: Path, layout: Callable[..., tuple[Path, str]]
) -> None:
    root, transcripts = layout(tmp_path)
    index = index_transcripts(DataSettings(transcripts=transcripts), root)
    places = index._places
    shown = [places.shown(row) for row in range(len(index))]
    assert shown == [shown_path(places.path(row), root) for row in range(len(index))]
    assert [t.source for t in index] == shown  # the name a read transcript carries, into messages
    if layout in (_plain, _linked_inside):  # some are named from the folder, the linked by their target
        assert "data/300_P/300_TRANSCRIPT.csv" in shown or "kept/daic/300_P/300_TRANSCRIPT.csv" in shown
    if layout is _plain:
        assert "data/store/kept.csv" in shown and "data/store/500_P/500_TRANSCRIPT.csv" in shown
    if layout is _above_the_project:
        assert "9_TRANSCRIPT.csv" in shown


def test_indexing_resolves_no_path_an_interview(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """shown_path resolved every interview's path at every stage's index (a lookup of each of its
    folders); now a plain interview costs none, whatever the number of interviews."""
    for item in range(100, 160):
        _daic(tmp_path / "data", item)
    resolved: list[str] = []
    realpath = os.path.realpath

    def counted(path: str | os.PathLike[str], *, strict: bool = False) -> str:
        resolved.append(os.fspath(path))
        return realpath(path, strict=strict)

    monkeypatch.setattr(os.path, "realpath", counted)
    index = index_transcripts(DataSettings(transcripts="data"), tmp_path)
    assert len(index) == 60
    assert not [path for path in resolved if "TRANSCRIPT" in path], resolved[:12]
    # The project and the folder, a few times each (the names, the folder's realpath that the reads
    # are held inside), whatever the number of interviews: the old index resolved 125 for these 60.
    assert len(resolved) <= 12, resolved[:12]
