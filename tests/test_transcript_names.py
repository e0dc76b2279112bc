"""The interviews folder against odd names and look-alike files (pipeline.data.transcript_places,
pipeline.data.transcripts): a link that leads out of the folder, one name in two Unicode spellings, a
name that is not UTF-8, something named like a transcript that is not a file. Each is refused when
the index is made, naming the file and the fix; the layouts that worked still do."""

from __future__ import annotations

import json
import os
import subprocess
import unicodedata
from pathlib import Path

import pytest

import pipeline.data.transcript_memo as memo
from pipeline.data.settings import DataSettings
from pipeline.data.transcripts import index_transcripts, load_transcripts
from pipeline.errors import InputError

_HEAD = "start_time\tstop_time\tspeaker\tvalue\n"
_SECRET = "aws_secret_access_key = not-a-transcript"


def _daic(path: Path, said: str = "fine") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_HEAD + f"1\t2\tEllie\thi\n2\t3\tParticipant\t{said}\n", encoding="utf-8")
    return path


def _secret(root: Path) -> Path:
    secret = root / "home" / ".aws" / "credentials"
    secret.parent.mkdir(parents=True)
    secret.write_text(f"Ellie: {_SECRET}\n")  # text a .txt interview would take
    return secret


def _load(root: Path, folder: str = "data") -> list[str]:
    return [t.item_id for t in load_transcripts(DataSettings(transcripts=folder), root)]


@pytest.mark.parametrize("name", ["301_TRANSCRIPT.csv", "301.txt"])
def test_a_link_to_a_file_outside_the_folder_is_refused_naming_where_it_leads(
    tmp_path: Path, name: str
) -> None:
    secret = _secret(tmp_path)
    _daic(tmp_path / "data" / "300_TRANSCRIPT.csv")
    if name.endswith(".csv"):
        secret.write_text(_HEAD + f"1\t2\tEllie\t{_SECRET}\n")
    (tmp_path / "data" / name).symlink_to(secret)
    with pytest.raises(InputError) as refused:
        _load(tmp_path)
    assert refused.value.path == f"data/{name}" and str(secret.resolve()) in refused.value.problem
    assert "outside the folder" in refused.value.problem and "copy the file in" in refused.value.fix
    assert _SECRET not in refused.value.message
    # The fix runs in any POSIX shell (GNU cp's --remove-destination is not on macOS) and keeps the file.
    command = refused.value.fix.split(": ", 1)[1]
    assert "--remove-destination" not in command
    subprocess.run(["sh", "-c", command], cwd=tmp_path, check=True)
    assert not (tmp_path / "data" / name).is_symlink() and secret.is_file()


def test_a_linked_interview_folder_that_leads_out_is_refused_for_the_file_read_through_it(
    tmp_path: Path,
) -> None:
    """DAIC-WOZ's layout, a folder an interview: a folder linked to one outside is outside."""
    _daic(tmp_path / "elsewhere" / "301_P" / "301_TRANSCRIPT.csv")
    _daic(tmp_path / "data" / "300_P" / "300_TRANSCRIPT.csv")
    (tmp_path / "data" / "301_P").symlink_to(tmp_path / "elsewhere" / "301_P")
    with pytest.raises(
        InputError, match=r"^data/301_P/301_TRANSCRIPT.csv: .*data/301_P, a link to .*elsewhere/301_P"
    ):
        _load(tmp_path)
    (tmp_path / "elsewhere" / "301_P" / "301_TRANSCRIPT.csv").rename(tmp_path / "elsewhere" / "notes.csv")
    assert _load(tmp_path) == ["300"]  # a linked folder holding nothing read is not read


def test_a_linked_interview_folder_s_fix_runs_in_sh_and_keeps_the_folder_it_led_to(tmp_path: Path) -> None:
    """The fix copies the folder in, in place of its link (review9): the file's own copy, put through
    the linked folder, landed where the link leads, and the same refusal came again."""
    _daic(tmp_path / "elsewhere" / "301_P" / "301_TRANSCRIPT.csv", "theirs")
    _daic(tmp_path / "data" / "300_P" / "300_TRANSCRIPT.csv")
    (tmp_path / "data" / "301_P").symlink_to(tmp_path / "elsewhere" / "301_P")
    with pytest.raises(InputError) as refused:
        _load(tmp_path)
    command = refused.value.fix.split(": ", 1)[1]
    subprocess.run(["sh", "-c", command], cwd=tmp_path, check=True)
    assert _load(tmp_path) == ["300", "301"]
    assert os.listdir(tmp_path / "elsewhere" / "301_P") == ["301_TRANSCRIPT.csv"]  # left as it was
    copied = (tmp_path / "data" / "301_P" / "301_TRANSCRIPT.csv").read_bytes()
    assert copied == (tmp_path / "elsewhere" / "301_P" / "301_TRANSCRIPT.csv").read_bytes()


def test_the_folder_itself_a_link_and_links_that_stay_inside_it_are_read(tmp_path: Path) -> None:
    """data/interviews -> /mnt/data: the folder is where it leads. A link from one file of it to
    another, or to a folder of it, stays inside and is read (its id from its own name)."""
    store = tmp_path / "mnt" / "data"
    _daic(store / "300_P" / "300_TRANSCRIPT.csv", "first")
    _daic(store / "kept" / "x_TRANSCRIPT.csv", "second")
    (store / "a.txt").write_text("Ellie: hi\nParticipant: a\n")
    (store / "b.txt").symlink_to("a.txt")
    (store / "302_TRANSCRIPT.csv").symlink_to(store / "kept" / "x_TRANSCRIPT.csv")
    (store / "303_P").symlink_to("300_P")  # a relative link, to a folder inside
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "interviews").symlink_to(store)
    with pytest.raises(InputError, match="item id '300' is already used by "):
        _load(tmp_path, "data/interviews")  # 303_P/300_TRANSCRIPT.csv is 300 again: read, and refused
    (store / "303_P").unlink()
    by_id = {t.item_id: t for t in load_transcripts(DataSettings(transcripts="data/interviews"), tmp_path)}
    assert list(by_id) == ["300", "302", "a", "b", "x"]
    assert by_id["302"].text == by_id["x"].text and by_id["b"].text == by_id["a"].text


def _nfc_nfd(tmp_path: Path) -> tuple[str, str]:
    composed, decomposed = "\u00e9", "e\u0301"
    assert unicodedata.normalize("NFC", decomposed) == composed
    try:
        _daic(tmp_path / "data" / f"{composed}_TRANSCRIPT.csv")
        _daic(tmp_path / "data" / f"{decomposed}_TRANSCRIPT.csv")
    except OSError:
        pytest.skip("this file system keeps one spelling of a name only")
    if len(os.listdir(tmp_path / "data")) != 2:
        pytest.skip("this file system keeps one spelling of a name only (macOS)")
    return composed, decomposed


def test_one_file_name_in_two_unicode_spellings_is_refused_as_one_id(tmp_path: Path) -> None:
    composed, decomposed = _nfc_nfd(tmp_path)
    memo.checked.clear()
    for _ in range(2):  # the second time, the file read first is remembered (only hashed)
        with pytest.raises(InputError) as refused:
            _load(tmp_path)
        first, second = sorted([composed, decomposed])
        assert refused.value.path == f"data/{second}_TRANSCRIPT.csv"
        assert f"looks the same as '{first}'" in refused.value.problem
        assert "U+0065 U+0301" in refused.value.problem and "U+00E9" in refused.value.problem
        assert f"of data/{first}_TRANSCRIPT.csv" in refused.value.problem
        assert "keep one of the two" in refused.value.fix


@pytest.mark.parametrize(
    ("first", "second"), [("\u00e9", "e\u0301"), ("K", "\u212a"), ("\u212b1", "\u00c51")]
)
def test_jsonl_ids_that_compose_to_one_are_refused_naming_the_line(
    tmp_path: Path, first: str, second: str
) -> None:
    """K and the Kelvin sign, Å and the Angstrom sign: NFC makes each pair one id."""
    lines = [json.dumps({"id": item, "text": "Ellie: hi"}) for item in (first, "other", second)]
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "all.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as refused:
        _load(tmp_path)
    assert (refused.value.path, refused.value.line) == ("data/all.jsonl", 3)
    assert f"'{second}'" in refused.value.problem and f"looks the same as '{first}'" in refused.value.problem
    assert "of data/all.jsonl:1" in refused.value.problem


def test_ids_that_differ_only_in_case_stay_two_items_and_the_same_id_is_refused_as_before(
    tmp_path: Path,
) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "A.txt").write_text("Ellie: hi\n")
    (tmp_path / "data" / "a.txt").write_text("Ellie: hi\n")
    assert _load(tmp_path) == ["A", "a"]
    _daic(tmp_path / "data" / "901_transcript.csv")
    _daic(tmp_path / "data" / "901_TRANSCRIPT.csv")
    with pytest.raises(
        InputError, match=r"item id '901' is already used by data/901_TRANSCRIPT\.csv\. Fix: give"
    ):
        _load(tmp_path)


@pytest.mark.parametrize("where", ["{}_TRANSCRIPT.csv", "{}.txt", "{}_P/301_TRANSCRIPT.csv"])
def test_a_file_name_that_is_not_utf8_is_refused_naming_its_bytes(tmp_path: Path, where: str) -> None:
    _daic(tmp_path / "data" / "300_TRANSCRIPT.csv")
    relative = os.fsencode(where.format("301\udcff"))  # the byte 0xff, as os.listdir gives it back
    try:
        os.makedirs(os.fsencode(tmp_path / "data") + b"/" + relative.rpartition(b"/")[0], exist_ok=True)
        _daic(Path(os.fsdecode(os.fsencode(tmp_path / "data") + b"/" + relative)))
    except (OSError, UnicodeError):
        pytest.skip("this file system takes UTF-8 names only")
    with pytest.raises(InputError) as refused:
        index_transcripts(DataSettings(transcripts="data"), tmp_path)
    assert refused.value.path.endswith("data/" + where.format("301\\xff"))
    assert "\udcff" not in refused.value.message and "not UTF-8" in refused.value.problem
    assert "rename it" in refused.value.fix


@pytest.mark.parametrize(
    "where", ["301_TRANSCRIPT.csv", "notes.txt", "part.jsonl", "301_P/301_TRANSCRIPT.csv"]
)
def test_a_folder_named_like_a_transcript_is_refused(tmp_path: Path, where: str) -> None:
    """A tool that writes a data set as a folder of parts (Spark's out.jsonl/part-0000.json) leaves
    a folder where a file was meant: skipped, its interviews would be missing without a word."""
    _daic(tmp_path / "data" / "300_P" / "300_TRANSCRIPT.csv")
    (tmp_path / "data" / where).mkdir(parents=True)
    with pytest.raises(InputError) as refused:
        _load(tmp_path)
    assert (
        refused.value.path == f"data/{where}" and "a folder named like a transcript" in refused.value.problem
    )
    assert "put the transcript file itself here" in refused.value.fix


def test_the_daic_layout_of_a_folder_an_interview_is_read_as_before(tmp_path: Path) -> None:
    for item in ("300", "301"):
        _daic(tmp_path / "data" / f"{item}_P" / f"{item}_TRANSCRIPT.csv")
        (tmp_path / "data" / f"{item}_P" / f"{item}_CLNF_features.txt").write_text("1 2 3\n")
        (tmp_path / "data" / f"{item}_P" / "features").mkdir()
    (tmp_path / "data" / "._300_TRANSCRIPT.csv").mkdir()  # metadata-like names stay ignored
    assert _load(tmp_path) == ["300", "301"]


@pytest.mark.parametrize("kind", ["dangling link", "pipe"])
def test_an_entry_named_like_a_transcript_that_is_not_a_file_is_refused(tmp_path: Path, kind: str) -> None:
    _daic(tmp_path / "data" / "300_TRANSCRIPT.csv")
    entry = tmp_path / "data" / "301_TRANSCRIPT.csv"
    if kind == "pipe":
        os.mkfifo(entry)
    else:
        entry.symlink_to("gone_TRANSCRIPT.csv")
    with pytest.raises(
        InputError, match=r"^data/301_TRANSCRIPT.csv: named like a transcript, but not a file"
    ):
        _load(tmp_path)


def test_a_label_id_spelled_in_another_unicode_form_than_its_transcript_says_so(tmp_path: Path) -> None:
    """A label file's id in NFC against a transcript named in NFD: the error names the transcript's
    spelling, not only "has no transcript"."""
    composed, decomposed = "\u00e9", "e\u0301"
    _daic(tmp_path / "data" / f"{decomposed}_TRANSCRIPT.csv")
    (tmp_path / "data" / "split.csv").write_text(f"Participant_ID\n{composed}\n", encoding="utf-8")
    settings = DataSettings(transcripts="data", labels="data/split.csv")
    with pytest.raises(InputError) as raised:
        load_transcripts(settings, tmp_path)
    assert raised.value.problem == (
        f"participant {composed} has no transcript in data: the transcript {decomposed!r} spells that id "
        "in another Unicode form"
    )
    assert "as the transcript's name spells it" in str(raised.value)
