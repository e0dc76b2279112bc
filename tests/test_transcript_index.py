"""pipeline.data.transcripts.index_transcripts: the transcripts as an index, each read from its file
when asked for (issue 33), the same transcripts, in the same order, with the same checks up front."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.data.settings import DataSettings
from pipeline.data.transcripts import Transcript, index_transcripts, load_transcripts
from pipeline.errors import InputError

REPO = Path(__file__).resolve().parents[1]


def _jsonl_line(item: str, text: str) -> str:
    return json.dumps({"id": item, "text": text}, ensure_ascii=False)


def _mixed(root: Path) -> Path:
    folder = root / "data"
    (folder / "300_P").mkdir(parents=True)
    (folder / "300_P" / "300_TRANSCRIPT.csv").write_text(
        "start_time\tstop_time\tspeaker\tvalue\n1\t2\tEllie\thi <sync>\n2\t3\tParticipant\tfine\n"
    )
    (folder / "b.txt").write_text("Ellie: how are you\nParticipant: ok [laughter]\n")
    lines = [
        _jsonl_line("12", "Ellie: é — ü\nParticipant: naïve café"),
        "",
        _jsonl_line("7", "Ellie: second\nParticipant: 😀 emoji"),
        json.dumps({"id": 5, "turns": [{"speaker": " Ellie ", "text": " a "}, {"speaker": "P", "text": "b"}]})
        + " ",
    ]
    # A byte order mark, CRLF line ends, a blank line and multi-byte characters: spans count bytes.
    (folder / "more.jsonl").write_bytes(b"\xef\xbb\xbf" + "\r\n".join(lines).encode() + b"\r\n")
    return folder


@pytest.mark.parametrize("drop_markers", [False, True])
def test_the_index_reads_the_same_transcripts_in_the_same_order(tmp_path: Path, drop_markers: bool) -> None:
    _mixed(tmp_path)
    settings = DataSettings(transcripts="data", drop_markers=drop_markers, speaker_separator=": ")
    index = index_transcripts(settings, tmp_path)
    eager = load_transcripts(settings, tmp_path)
    assert index.ids == ["5", "7", "12", "300", "b"]
    assert [t.item_id for t in eager] == index.ids
    assert list(index) == eager and index[1:3] == eager[1:3] and len(index) == 5
    assert dict(index.by_id) == {t.item_id: t for t in eager}
    assert index.by_id["12"].text == "Ellie: é — ü\nParticipant: naïve café"
    with pytest.raises(KeyError):
        index.by_id["nope"]


def test_the_index_holds_no_transcript(tmp_path: Path) -> None:
    _mixed(tmp_path)
    index = index_transcripts(DataSettings(transcripts="data"), tmp_path)
    held = [v for v in vars(index).values() if isinstance(v, Transcript)]
    held += [v for v in vars(index._places).values() if isinstance(v, Transcript)]
    assert not held
    assert index.get("7") is not index.get("7")  # read again each time, not kept


def test_a_bad_line_is_refused_when_the_index_is_made(tmp_path: Path) -> None:
    folder = _mixed(tmp_path)
    with (folder / "more.jsonl").open("ab") as out:
        out.write(b'{"id": "9"}\r\n')
    with pytest.raises(InputError) as refused:
        index_transcripts(DataSettings(transcripts="data"), tmp_path)
    assert refused.value.path == "data/more.jsonl" and refused.value.line == 5


def test_a_file_changed_after_indexing_is_named(tmp_path: Path) -> None:
    folder = _mixed(tmp_path)
    index = index_transcripts(DataSettings(transcripts="data"), tmp_path)
    changed = [_jsonl_line("8", "Ellie: x"), _jsonl_line("99", "Ellie: y")]
    (folder / "more.jsonl").write_text("\n".join(changed) + "\n")
    with pytest.raises(InputError) as refused:
        index.get("12")
    assert refused.value.path == "data/more.jsonl" and "changed" in str(refused.value)


def test_the_demo_data_as_an_index() -> None:
    from pipeline.experiments.paper.params import load_paper_params

    params = load_paper_params(REPO / "params.yaml")
    assert list(index_transcripts(params.data, REPO)) == load_transcripts(params.data, REPO)


def test_a_file_checked_before_in_this_process_is_only_hashed_and_changed_bytes_are_checked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Status' dry runs and the bench's in-process stages index the same files again (issue 33): the
    same bytes under the same name and cleaning are not parsed again, and give the same index; other
    bytes, or other cleaning, are read and checked in full, their errors naming the file and line."""
    import pipeline.data.transcript_memo as memo
    from pipeline.data.transcript_files import read_indexed

    folder = _mixed(tmp_path)
    settings = DataSettings(transcripts=str(folder), drop_markers=True)
    first = load_transcripts(settings, tmp_path)
    parsed: list[str] = []

    def counted(path: Path, shown: str, data: bytes) -> object:
        parsed.append(path.name)
        return read_indexed(path, shown, data)

    monkeypatch.setattr(memo, "read_indexed", counted)
    assert load_transcripts(settings, tmp_path) == first
    assert parsed == []
    with pytest.raises(InputError, match=r"more\.jsonl:4: no turns left after"):
        index_transcripts(DataSettings(transcripts=str(folder), participant_only=True), tmp_path)
    assert "more.jsonl" in parsed
    parsed.clear()
    (folder / "b.txt").write_text("Ellie: how are you\nno speaker here\n")
    with pytest.raises(InputError, match=r"b\.txt:2: the line lacks a 'Speaker:'"):
        index_transcripts(settings, tmp_path)
    assert "b.txt" in parsed
    # A file remembered is still checked against the others: the same bytes and name twice.
    copy = (folder / "300_P" / "300_TRANSCRIPT.csv").read_bytes()
    (tmp_path / "again" / "300_P").mkdir(parents=True)
    (tmp_path / "again" / "300_TRANSCRIPT.csv").write_bytes(copy)
    (tmp_path / "again" / "300_P" / "300_TRANSCRIPT.csv").write_bytes(copy)
    parsed.clear()
    with pytest.raises(InputError, match=r"item id '300' is already used by again/300_TRANSCRIPT\.csv"):
        index_transcripts(DataSettings(transcripts="again", drop_markers=True), tmp_path)
    assert parsed == []  # both remembered (the same bytes and name as data/300_P's)


_HEAD = "start_time\tstop_time\tspeaker\tvalue\n"
_CSVS = {
    "400_TRANSCRIPT.csv": _HEAD + "1\t2\tEllie\thi <sync>\n2\t3\tParticipant\t[laughter]\n",
    "401_TRANSCRIPT.csv": _HEAD + "1\t2\tEllie\t<sync>\n 2 \t3\tPatient\tfine\n",
    "402_TRANSCRIPT.csv": "speaker\tvalue\nEllie\thow are you\nEllie\t[sigh]\n",
    "notes.csv": _HEAD + "1\t2\tSUBJECT\tok <x>  done\n",
}


@pytest.mark.parametrize("drop_markers", [False, True])
@pytest.mark.parametrize("participant_only", [False, True])
@pytest.mark.parametrize("name", sorted(_CSVS))
def test_the_index_checks_a_csv_from_its_rows_as_the_turns_would_be_checked(
    tmp_path: Path, name: str, drop_markers: bool, participant_only: bool
) -> None:
    """The index checks a DAIC-WOZ file from its rows, no turn made (issue 33): the same speakers
    once cleaned, and the same error, as the transcript read, its turns made and cleaned."""
    from pipeline.data.transcript_files import read_file
    from pipeline.data.transcript_memo import checked_transcripts
    from pipeline.data.transcript_text import Transcript, clean

    (tmp_path / name).write_text(_CSVS[name])
    settings = DataSettings(transcripts=".", drop_markers=drop_markers, participant_only=participant_only)
    try:
        rows = read_file(tmp_path / name, name, (tmp_path / name).read_bytes())
        full = Transcript(item_id=rows.item_id, turns=rows.turns, source=rows.source)
        expected: object = frozenset(t.speaker for t in clean(full, settings, None).turns)
    except InputError as exc:
        expected = str(exc)
    try:
        data = (tmp_path / name).read_bytes()
        [(item_id, _, said)] = checked_transcripts(tmp_path / name, name, settings, {}, data)
        got: object = said
        assert item_id == full.item_id
    except InputError as exc:
        got = str(exc)
    assert got == expected


# What an index holds a transcript (issue 33): a million interviews' index was about 1.8 GB held
# through every stage (a Path, a dataclass, a stamp tuple and a set of speakers an item). Its row
# now: the file's name under the folder, five numbers; the process's memo of checked files (a
# digest, the id and the speakers shared) is counted with it. Bounds on traced bytes, never time;
# what pathlib allocates is left out (the interpreter's table of interned names, which a Path's
# parts pass through, may grow by a megabyte at any time; no Path is held now).
INDEX_BYTES_A_TRANSCRIPT = 600
INDEX_FIXED_BYTES = 256 << 10


def test_an_index_holds_a_few_hundred_bytes_a_transcript_not_a_path_each(tmp_path: Path) -> None:
    import gc
    import pathlib
    import tracemalloc

    import pipeline.data.transcript_memo as memo

    count = 3000
    for n in range(10_000, 10_000 + count):  # as DAIC-WOZ lays them out: a folder each
        (tmp_path / "data" / f"{n}_P").mkdir(parents=True)
        (tmp_path / "data" / f"{n}_P" / f"{n}_TRANSCRIPT.csv").write_text(
            _HEAD + f"1\t2\tEllie\thello {n}\n2\t3\tParticipant\tfine <sync> thanks\n"
        )
    settings = DataSettings(transcripts="data", drop_markers=True)
    memo.checked.clear()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        index = index_transcripts(settings, tmp_path)
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    not_pathlib = [
        tracemalloc.Filter(False, pathlib.__file__),
        tracemalloc.Filter(False, tracemalloc.__file__),
    ]
    held = sum(s.size_diff for s in after.filter_traces(not_pathlib).compare_to(before, "filename"))
    assert len(index) == count and index.ids[0] == "10000"
    assert held <= INDEX_FIXED_BYTES + INDEX_BYTES_A_TRANSCRIPT * count, (
        f"{held / count:.0f} bytes a transcript"
    )
    assert index.by_id["10001"].text.endswith("Participant : fine thanks")
    assert index[-1].item_id == str(10_000 + count - 1) and "nope" not in index.by_id


def test_a_full_memo_of_checked_files_keeps_what_it_holds_for_the_next_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every stage indexes the files in the same order. A memo cleared when full found none of them
    again past its size (at a million interviews, each stage checked every file anew); one that keeps
    what it holds finds as many as it holds."""
    import pipeline.data.transcript_memo as memo

    for n in range(5):
        (tmp_path / "data").mkdir(exist_ok=True)
        (tmp_path / "data" / f"{n}.txt").write_text(f"Ellie: hello {n}\nParticipant: fine\n")
    checked: list[str] = []
    check = memo.checked_transcripts

    def counted(path: Path, *args: object, **kwargs: object) -> object:
        checked.append(path.name)
        return check(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(memo, "checked_transcripts", counted)
    monkeypatch.setattr(memo, "CHECKED_FILES", 3)
    monkeypatch.setattr(memo, "checked", {})
    settings = DataSettings(transcripts="data")
    first = index_transcripts(settings, tmp_path)
    assert checked == [f"{n}.txt" for n in range(5)]
    checked.clear()
    again = index_transcripts(settings, tmp_path)
    assert checked == ["3.txt", "4.txt"]  # the three the memo holds are only hashed
    assert again.ids == first.ids and [t.text for t in again] == [t.text for t in first]
