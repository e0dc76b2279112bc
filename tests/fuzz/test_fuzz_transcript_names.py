"""Fuzzing the interviews folder's names and kinds of entry (pipeline.data.transcript_places): names
in two Unicode spellings, a Kelvin sign, a byte that is not UTF-8; files, folders, links that stay in
the folder or lead out of it, links to nothing, each flat or one folder down. The property of every
reader (tests/fuzz/support.py), and of an index made: its ids are distinct in Unicode's composed form
and UTF-8, and nothing it reads lies outside the folder (a link out is never followed)."""

from __future__ import annotations

import os
import shutil
import unicodedata
from pathlib import Path

import click
from hypothesis import given
from hypothesis import strategies as st

from pipeline.data.settings import DataSettings
from pipeline.data.transcripts import index_transcripts
from tests.fuzz.support import clear_or_correct, fuzz, only_inside

_SECRET = "not-a-transcript-but-a-key"
_CONTENT = {
    ".csv": "start_time\tstop_time\tspeaker\tvalue\n1\t2\tEllie\thi\n2\t3\tParticipant\t{}\n",
    ".txt": "Ellie: hi\nParticipant: {}\n",
    ".jsonl": '{{"id": "j", "text": "Ellie: hi\\nParticipant: {}"}}\n',
}
# The last: é again, as its UTF-8 bytes would be read from a name that is not UTF-8 (it is).
_STEMS = ["301", "\u00e9", "e\u0301", "K", "\u212a", "301\udcff", "\udcc3\udca9"]
_SUFFIXES = ["_TRANSCRIPT.csv", "_transcript.csv", ".txt", ".jsonl", ".csv"]
_KINDS = ["file", "folder", "link in", "link out", "link to nothing", "linked folder out"]


def _content(name: str, said: str) -> bytes:
    suffix = next(s for s in _CONTENT if name.endswith(s) or name.lower().endswith(s))
    return _CONTENT[suffix].format(said).encode()


def _make(folder: Path, outside: Path, relative: str, kind: str) -> None:
    """One entry at `relative` (a str a byte that is not UTF-8 kept as a surrogate, as os.listdir
    gives it), made with its bytes."""
    here = os.fsencode(folder / relative)
    if os.path.lexists(here):
        return
    os.makedirs(os.path.dirname(here), exist_ok=True)
    name = relative.rsplit("/", 1)[-1]
    if kind == "file":
        (folder / relative).write_bytes(_content(name, "fine"))
    elif kind == "folder":
        os.mkdir(here)
    elif kind == "link in":
        kept = folder / "kept" / f"k_{len(os.listdir(folder))}{name[-4:]}"
        kept.parent.mkdir(exist_ok=True)
        kept.write_bytes(_content(name, "kept"))
        os.symlink(os.fsencode(kept), here)
    elif kind == "link to nothing":
        os.symlink(b"gone", here)
    else:  # out: the file a link to one outside, or the folder holding it (a transcript in it)
        target = outside / f"{len(os.listdir(outside))}"
        target.mkdir()
        inside = "f" if kind == "link out" else name.removesuffix("_P") + "_TRANSCRIPT.csv"
        Path(os.fsdecode(os.fsencode(target / inside))).write_bytes(
            _content(name if inside == "f" else inside, _SECRET)
        )
        os.symlink(os.fsencode(target / "f" if kind == "link out" else target), here)


@fuzz
@given(
    entries=st.lists(
        st.tuples(
            st.sampled_from(_STEMS), st.sampled_from(_SUFFIXES), st.sampled_from(_KINDS), st.booleans()
        ),
        max_size=5,
    )
)
def test_odd_names_and_links_are_read_inside_as_distinct_ids_or_refused(
    sandbox: Path, entries: list[tuple[str, str, str, bool]]
) -> None:
    folder, outside = sandbox / "data" / "names", sandbox / "outside"
    for old in (folder, outside):
        shutil.rmtree(old, ignore_errors=True)
    folder.mkdir(parents=True)
    outside.mkdir()
    for stem, suffix, kind, nested in entries:
        relative = f"{stem}_P/{stem}{suffix}" if nested else f"{stem}{suffix}"
        if kind == "linked folder out":
            relative, kind = (f"{stem}_P", kind) if nested else (relative, "link out")
        try:
            _make(folder, outside, relative, kind)
        except OSError:  # its folder is a file drawn before, or a link to nothing
            continue
    index = clear_or_correct(lambda: index_transcripts(DataSettings(transcripts="data/names"), sandbox))
    if not isinstance(index, click.ClickException):
        composed = {unicodedata.normalize("NFC", item_id) for item_id in index.ids}
        assert len(composed) == len(index.ids), index.ids
        assert all(item_id.encode("utf-8") for item_id in index.ids)  # no lone surrogate
        real = os.path.realpath(folder)
        for row in range(len(index)):
            assert os.path.realpath(index._places.path(row)).startswith(real + os.sep)
        assert not any(_SECRET in transcript.text for transcript in index)
    only_inside(sandbox.parent, sandbox)
