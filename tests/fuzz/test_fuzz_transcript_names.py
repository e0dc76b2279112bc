"""Fuzzing the interviews folder's names and kinds of entry (pipeline.data.transcript_places): names
in two Unicode spellings, a Kelvin sign, a byte that is not UTF-8; files, folders, links that stay in
the folder or lead out of it, links to nothing, each flat or one folder down. The property of every
reader (tests/fuzz/support.py), and of an index made: its ids are distinct in Unicode's composed form
and UTF-8, and nothing it reads lies outside the folder (a link out is never followed).

And entries replaced while a stage runs (pipeline.data.transcript_open), after the folder was listed
or after the index was made: each item reads as the index read it, or is refused; nothing outside
the folder is read."""

from __future__ import annotations

import os
import shutil
import unicodedata
from pathlib import Path

import click
from hypothesis import given
from hypothesis import strategies as st

import pipeline.data.transcripts as transcripts
from pipeline.data.settings import DataSettings
from pipeline.data.transcript_places import found
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


# -- entries replaced while a stage runs ----------------------------------------------------------

_SAID = "fine" * 10  # long enough that what replaces it (the secret, "evil") is padded to its size
_LAYOUT = {
    "300.txt": "Ellie: hi\nParticipant: {}\n",
    "301_P/301_TRANSCRIPT.csv": "speaker\tvalue\nEllie\thi\nParticipant\t{}\n",
    "x.jsonl": '{{"id": "a", "text": "Ellie: one"}}\n{{"id": "b", "text": "Participant: {}"}}\n',
}
_FILE_OF = {"300": "300.txt", "301": "301_P/301_TRANSCRIPT.csv", "a": "x.jsonl", "b": "x.jsonl"}
_SWAPS = ["rewritten", "another file", "link out", "link in", "folder", "pipe", "gone"]


def _said(relative: str, said: str) -> bytes:
    return _LAYOUT[relative].format(said + "x" * (len(_SAID) - len(said))).encode()


def _swap(folder: Path, outside: Path, relative: str, kind: str) -> None:
    """`relative` replaced by `kind`, of the same size and times where it is a file or a link to
    one; its text "evil", or the secret for a link out. An entry replaced before is left."""
    entry = folder / relative
    if entry.is_symlink() or not entry.is_file():
        return
    status = entry.stat()
    if kind in ("folder", "pipe", "gone"):
        entry.unlink()
        {"folder": os.mkdir, "pipe": os.mkfifo, "gone": lambda _: None}[kind](entry)
        return
    other = {
        "rewritten": entry,
        "another file": folder.parent / "next",
        "link out": outside / f"{len(os.listdir(outside))}",
        "link in": folder / f"kept-{len(os.listdir(folder))}",
    }[kind]
    other.write_bytes(_said(relative, _SECRET if kind == "link out" else "evil"))
    os.utime(other, ns=(status.st_atime_ns, status.st_mtime_ns))
    if kind == "another file":
        other.replace(entry)
    elif kind != "rewritten":
        entry.unlink()
        entry.symlink_to(other)


@fuzz
@given(
    swaps=st.lists(st.tuples(st.sampled_from(sorted(_LAYOUT)), st.sampled_from(_SWAPS)), max_size=3),
    listed=st.booleans(),
)
def test_interviews_replaced_while_a_stage_runs_read_as_indexed_or_are_refused(
    sandbox: Path, swaps: list[tuple[str, str]], listed: bool
) -> None:
    folder, outside = sandbox / "data" / "swapped", sandbox / "outside"
    for old in (folder, outside):
        shutil.rmtree(old, ignore_errors=True)
    outside.mkdir(parents=True)
    for relative in _LAYOUT:
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_bytes(_said(relative, _SAID))
    settings = DataSettings(transcripts="data/swapped")
    before = {t.item_id: t.text for t in index_transcripts(settings, sandbox)}

    def swapped() -> None:
        for relative, kind in swaps:
            _swap(folder, outside, relative, kind)

    def listed_then_swapped(path: Path, root: Path) -> list[str]:
        names = found(path, root)
        swapped()
        return names

    if listed:  # replaced after the folder was listed, before the index reads them
        setattr(transcripts, "found", listed_then_swapped)  # noqa: B010 (not an export of it)
    try:
        index = clear_or_correct(lambda: index_transcripts(settings, sandbox))
    finally:
        setattr(transcripts, "found", found)  # noqa: B010
    if isinstance(index, click.ClickException):
        assert _SECRET not in index.message
        return
    if not listed:
        swapped()
    touched = {relative for relative, _ in swaps}
    assert set(index.ids) == set(before)  # (an entry gone is refused by the index)
    for item_id in index.ids:
        text = clear_or_correct(lambda: index.get(item_id).text)  # noqa: B023 (called at once)
        if isinstance(text, click.ClickException):
            assert _SECRET not in text.message
            assert not listed, "refused when the index read what it later reads"
            continue
        assert _SECRET not in text
        # (Replaced after the listing, before the index read it: a file inside is read as it is then.)
        if _FILE_OF[item_id] not in touched or not listed:
            assert text == before[item_id], (item_id, text)
    only_inside(sandbox.parent, sandbox)
