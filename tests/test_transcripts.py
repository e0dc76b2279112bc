"""pipeline.data.transcripts: every input format, every bad input, the demo data and a real corpus."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from pipeline.data.input_files import InputWarning
from pipeline.data.labels import load_labels
from pipeline.data.settings import DataSettings
from pipeline.data.transcripts import SEARCHED, Transcript, Turn, load_transcripts
from pipeline.errors import ConfigError, InputError

REPO = Path(__file__).resolve().parents[1]
HEADER = "start_time\tstop_time\tspeaker\tvalue"
LABEL_HEADER = (
    "Participant_ID,PHQ8_Binary,PHQ8_Score,Gender,PHQ8_NoInterest,PHQ8_Depressed,PHQ8_Sleep,"
    "PHQ8_Tired,PHQ8_Appetite,PHQ8_Failure,PHQ8_Concentrating,PHQ8_Moving"
)


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def daic(path: Path, *rows: str, header: str = HEADER) -> Path:
    return write(path, "\n".join([header, *rows]) + "\n")


def load(root: Path, target: str = ".", **options: object) -> list[Transcript]:
    return load_transcripts(DataSettings.model_validate({"transcripts": target, **options}), root=root)


def raises_at(where: str, call: Callable[[], object]) -> InputError:
    """The call fails with an InputError whose message names `where` (file:line) and a fix."""
    with pytest.raises(InputError) as caught:
        call()
    message = caught.value.format_message()
    assert where in message, message
    assert "Fix: " in message and caught.value.fix.strip(), message
    return caught.value


# --- formats -----------------------------------------------------------------------------------


def test_daic_layout_folders_and_flat_files(tmp_path: Path) -> None:
    daic(
        tmp_path / "300_P" / "300_TRANSCRIPT.csv",
        "36.588\t39.868\tEllie\thi i'm ellie thanks for coming in today",
        "40.1\t41.0\tParticipant\t",  # empty value: the original dropna() dropped it
        "41.5\t43.0\t\tnobody said this",  # empty speaker: dropped likewise
        "43.2\t45.9\tParticipant\t  i'm good  ",
    )
    daic(tmp_path / "301_TRANSCRIPT.csv", "0\t1\tEllie\thow are you")
    transcripts = load(tmp_path)
    assert [t.item_id for t in transcripts] == ["300", "301"]
    first = transcripts[0]
    assert first.source == "300_P/300_TRANSCRIPT.csv"
    assert first.turns[0] == Turn(
        speaker="Ellie", text="hi i'm ellie thanks for coming in today", start=36.588, stop=39.868
    )
    assert first.render(": ") == "Ellie: hi i'm ellie thanks for coming in today\nParticipant: i'm good"
    # The original scripts' separator, for byte parity with them when wanted.
    assert first.render(" : ").splitlines()[1] == "Participant : i'm good"


def test_daic_reads_quotes_literally_and_columns_by_name(tmp_path: Path) -> None:
    daic(
        tmp_path / "7_TRANSCRIPT.csv",
        'Participant\t"let\'s not," she said. "ok"\t1.0',
        header="speaker\tvalue\tstart_time",
    )
    (transcript,) = load(tmp_path)
    assert transcript.turns == (Turn(speaker="Participant", text='"let\'s not," she said. "ok"', start=1.0),)


def test_daic_ignores_the_feature_files_real_folders_hold(tmp_path: Path) -> None:
    daic(tmp_path / "300_P" / "300_TRANSCRIPT.csv", "0\t1\tEllie\thi")
    write(tmp_path / "300_P" / "300_CLNF_features.txt", "frame, timestamp, confidence\n1, 0.0, 0.9\n")
    write(tmp_path / "train_split_Depression_AVEC2017.csv", LABEL_HEADER + "\n")
    assert [t.item_id for t in load(tmp_path)] == ["300"]


def test_plain_text(tmp_path: Path) -> None:
    write(tmp_path / "s1.txt", "Ellie: when did you wake up\n\nParticipant: at 3:30 again\nEllie :  ok\n")
    (transcript,) = load(tmp_path)
    assert transcript.item_id == "s1"
    assert [(t.speaker, t.text) for t in transcript.turns] == [
        ("Ellie", "when did you wake up"),
        ("Participant", "at 3:30 again"),
        ("Ellie", "ok"),
    ]


def test_jsonl_both_schemas(tmp_path: Path) -> None:
    lines = [
        json.dumps({"id": 12, "turns": [{"speaker": "Ellie", "text": "hi", "start": 0.5, "stop": 1}]}),
        "",
        json.dumps({"id": "a7", "text": "Ellie: hi\nParticipant: hello", "note": "ignored"}),
    ]
    write(tmp_path / "batch.jsonl", "\n".join(lines) + "\n")
    twelve, a7 = load(tmp_path)
    assert (twelve.item_id, twelve.turns) == ("12", (Turn(speaker="Ellie", text="hi", start=0.5, stop=1.0),))
    assert (a7.item_id, a7.render(": "), a7.source) == ("a7", "Ellie: hi\nParticipant: hello", "batch.jsonl")


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("x/450_TRANSCRIPT.csv", f"{HEADER}\n0\t1\tEllie\thi\n"),
        ("x/450.txt", "Ellie: hi\n"),
        ("x/any.jsonl", '{"id": "450", "text": "Ellie: hi"}\n'),
    ],
)
def test_a_single_file_path(tmp_path: Path, name: str, content: str) -> None:
    write(tmp_path / name, content)
    (transcript,) = load(tmp_path, name)
    assert (transcript.item_id, transcript.render(": "), transcript.source) == ("450", "Ellie: hi", name)


def test_windows_line_endings_and_a_bom(tmp_path: Path) -> None:
    write(tmp_path / "5_TRANSCRIPT.csv", ("\ufeff" + HEADER + "\r\n0\t1\tEllie\thi\r\n").encode())
    assert load(tmp_path)[0].render(": ") == "Ellie: hi"


def test_sorted_numerically_then_limited(tmp_path: Path) -> None:
    for item in ("300", "10", "9", "abc"):
        write(tmp_path / f"{item}.txt", "Ellie: hi\n")
    assert [t.item_id for t in load(tmp_path)] == ["9", "10", "300", "abc"]
    assert [t.item_id for t in load(tmp_path, limit=2)] == ["9", "10"]
    with pytest.raises(ValidationError, match="greater than or equal to 0"):  # refused with the params
        load(tmp_path, limit=-1)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["Ellie", "Participant"]),
            st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1).filter(
                lambda s: s.strip() != ""
            ),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_daic_round_trip(tmp_path_factory: pytest.TempPathFactory, turns: list[tuple[str, str]]) -> None:
    root = tmp_path_factory.mktemp("rt")
    daic(root / "1_TRANSCRIPT.csv", *(f"0\t1\t{speaker}\t{text}" for speaker, text in turns))
    (transcript,) = load(root)
    assert [(t.speaker, t.text) for t in transcript.turns] == [(s, x.strip()) for s, x in turns]


# --- bad input: each names the file, the line and a fix -----------------------------------------


def test_empty_file(tmp_path: Path) -> None:
    write(tmp_path / "3_TRANSCRIPT.csv", "\n  \n")
    raises_at("3_TRANSCRIPT.csv:1:", lambda: load(tmp_path))


def test_missing_columns_says_found_and_expected(tmp_path: Path) -> None:
    daic(tmp_path / "3_TRANSCRIPT.csv", "0\t1\tEllie\thi", header="start\tstop\tSpeaker\ttext")
    error = raises_at("3_TRANSCRIPT.csv:1:", lambda: load(tmp_path))
    assert "'start', 'stop', 'speaker', 'text'" in error.problem
    assert "value" in error.problem and "speaker" in error.fix


def test_comma_separated_transcript_is_named_as_such(tmp_path: Path) -> None:
    write(tmp_path / "3_TRANSCRIPT.csv", "start_time,stop_time,speaker,value\n0,1,Ellie,hi\n")
    error = raises_at("3_TRANSCRIPT.csv:1:", lambda: load(tmp_path))
    assert "comma-separated" in error.problem and "tab-separated" in error.fix


def test_header_without_rows(tmp_path: Path) -> None:
    daic(tmp_path / "3_TRANSCRIPT.csv")
    raises_at("3_TRANSCRIPT.csv:", lambda: load(tmp_path))


def test_undecodable_bytes_name_their_line(tmp_path: Path) -> None:
    write(
        tmp_path / "3_TRANSCRIPT.csv",
        f"{HEADER}\n0\t1\tEllie\thi\n1\t2\tParticipant\tcaf\xe9\n".encode("latin-1"),
    )
    error = raises_at("3_TRANSCRIPT.csv:3:", lambda: load(tmp_path))
    assert "0xe9" in error.problem and "UTF-8" in error.fix


def test_row_with_the_wrong_number_of_fields(tmp_path: Path) -> None:
    daic(tmp_path / "3_TRANSCRIPT.csv", "0\t1\tEllie\thi", "1\t2\tParticipant\tyes\tand\tno")
    error = raises_at("3_TRANSCRIPT.csv:3:", lambda: load(tmp_path))
    assert "6" in error.problem and "4" in error.problem


def test_time_that_is_not_a_number(tmp_path: Path) -> None:
    daic(tmp_path / "3_TRANSCRIPT.csv", "0\t1\tEllie\thi", "\n", "soon\t2\tParticipant\tyes")
    raises_at("3_TRANSCRIPT.csv:5:", lambda: load(tmp_path))


def test_text_line_without_a_speaker(tmp_path: Path) -> None:
    write(tmp_path / "notes.txt", "Ellie: hi\njust some prose\n")
    raises_at("notes.txt:2:", lambda: load(tmp_path))


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"id": "1", "turns": [', "JSON"),
        ('{"id": "1"}', "'turns' or 'text'"),
        ('{"turns": []}', "id"),
        ('{"id": "1", "turns": [{"speaker": "Ellie"}]}', "turns.0.text"),
        ('{"id": "1", "text": "Ellie: hi\\nno speaker here"}', "line 2 of its 'text'"),
        ('{"id": "1", "turns": [{"speaker": "Ellie", "text": " "}]}', "no turn"),
    ],
)
def test_bad_jsonl_lines(tmp_path: Path, line: str, expected: str) -> None:
    write(tmp_path / "b.jsonl", '{"id": "0", "text": "Ellie: fine"}\n' + line + "\n")
    error = raises_at("b.jsonl:2:", lambda: load(tmp_path))
    assert expected in error.problem


def test_duplicate_ids_across_files_name_both(tmp_path: Path) -> None:
    daic(tmp_path / "300_P" / "300_TRANSCRIPT.csv", "0\t1\tEllie\thi")
    daic(tmp_path / "300_TRANSCRIPT.csv", "0\t1\tEllie\thi")
    error = raises_at("300_TRANSCRIPT.csv", lambda: load(tmp_path))
    assert "300_P/300_TRANSCRIPT.csv" in error.format_message()


def test_duplicate_ids_in_jsonl_name_both_lines(tmp_path: Path) -> None:
    write(tmp_path / "a.jsonl", '{"id": "x", "text": "Ellie: a"}\n{"id": 5, "text": "Ellie: b"}\n')
    write(tmp_path / "b.jsonl", '\n{"id": "5", "text": "Ellie: c"}\n')
    error = raises_at("b.jsonl:2:", lambda: load(tmp_path))
    assert "a.jsonl:2" in error.problem


def test_folder_without_transcripts_names_the_patterns(tmp_path: Path) -> None:
    write(tmp_path / "data" / "notes.md", "nothing here\n")
    error = raises_at("data:", lambda: load(tmp_path, "data"))
    assert all(pattern in error.problem for pattern in SEARCHED)


def test_missing_path(tmp_path: Path) -> None:
    raises_at("nowhere:", lambda: load(tmp_path, "nowhere"))


def test_macos_metadata_files_are_skipped_with_a_warning(tmp_path: Path) -> None:
    daic(tmp_path / "487_P" / "487_TRANSCRIPT.csv", "0\t1\tEllie\thi")
    # Real AppleDouble files are binary; reading one as a transcript would fail on its bytes.
    write(tmp_path / "._487_TRANSCRIPT.csv", b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        \xff")
    write(tmp_path / "487_P" / "._487_TRANSCRIPT.csv", b"\x00\x05\x16\x07\xff")
    write(tmp_path / ".DS_Store", b"\x00\x00\x00\x01Bud1\xff")
    with pytest.warns(InputWarning) as caught:
        transcripts = load(tmp_path)
    assert [t.item_id for t in transcripts] == ["487"]
    warned = sorted(str(w.message).split(":")[0] for w in caught)
    assert warned == [".DS_Store", "._487_TRANSCRIPT.csv", "487_P/._487_TRANSCRIPT.csv"]


# --- cleaning options --------------------------------------------------------------------------


@pytest.fixture
def marked(tmp_path: Path) -> Path:
    daic(
        tmp_path / "1_TRANSCRIPT.csv",
        "0\t1\tEllie\thi <sync> how are you",
        "1\t2\tParticipant\t<synch>",
        "2\t3\tPARTICIPANT\tfine [laughter]  i guess <laughter>",
        "3\t4\tclient\t[unintelligible 00:01:33]",
    )
    return tmp_path


def test_paper_parity_keeps_markers_and_every_speaker(marked: Path) -> None:
    (transcript,) = load(marked)
    assert len(transcript.turns) == 4 and "<synch>" in transcript.text


def test_drop_markers(marked: Path) -> None:
    (transcript,) = load(marked, drop_markers=True)
    assert transcript.render(": ") == "Ellie: hi how are you\nPARTICIPANT: fine i guess"


def test_participant_only_matches_names_case_insensitively(marked: Path) -> None:
    (transcript,) = load(marked, participant_only=True)
    assert [t.speaker for t in transcript.turns] == ["Participant", "PARTICIPANT", "client"]


def test_participant_only_with_no_subject_turns(tmp_path: Path) -> None:
    write(tmp_path / "9.txt", "A: hi\nB: hello\n")
    error = raises_at("9.txt", lambda: load(tmp_path, participant_only=True))
    assert "A, B" in error.problem and "participant" in error.fix


# --- labels ------------------------------------------------------------------------------------


def test_labels_train_layout() -> None:
    labels = load_labels(REPO / "data" / "demo" / "labels.csv")
    assert labels["904"].score == 20 and labels["904"].failure == 3 and labels["904"].binary == 1


def test_labels_test_split_layouts(tmp_path: Path) -> None:
    short = write(tmp_path / "test_split.csv", "participant_ID,Gender\n300,1\n301.0,0\n")
    assert load_labels(short)["301"].model_dump(exclude_none=True) == {"item_id": "301", "gender": 0}
    full = write(tmp_path / "full_test_split.csv", "Participant_ID,PHQ_Binary,PHQ_Score,Gender\n300,1,12,0\n")
    assert (load_labels(full)["300"].binary, load_labels(full)["300"].score) == (1, 12)


def test_labels_that_disagree_with_themselves_warn(tmp_path: Path) -> None:
    path = write(tmp_path / "l.csv", f"{LABEL_HEADER}\n409,1,9,0,1,1,1,1,1,1,1,1\n")
    with pytest.warns(InputWarning) as caught:
        load_labels(path)
    assert [str(w.message).split("l.csv:")[1] for w in caught] == [
        "2: PHQ8_Score 9 is not the item sum 8",
        "2: PHQ8_Binary 1 but PHQ8_Score 9",
    ]


@pytest.mark.parametrize(
    ("content", "where", "expected"),
    [
        ("ID,Score\n300,4\n", ":1:", "'id', 'score'"),
        ("Participant_ID,PHQ8_Score\n300,25\n", ":2:", "0 to 24"),
        ("Participant_ID,PHQ8_Sleep\n300,\n301,often\n", ":3:", "'often'"),
        ("Participant_ID,Gender\n300,1\n300,0\n", ":3:", "line 2"),
        ("Participant_ID,Gender\n300,1,0\n", ":2:", "3 comma-separated"),
        ("Participant_ID,Gender\n\n", ":2:", "no rows"),
        # A quoted cell spanning lines: the next record is still reported by its own line.
        ('Participant_ID,Note,Gender\n300,"two\nlines",1\n301,x,7\n', ":4:", "'7'"),
        ('Participant_ID,Gender\n300,"open\n', ":2:", "not CSV"),
        ("", ":1:", "empty"),
    ],
)
def test_bad_labels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str, where: str, expected: str
) -> None:
    monkeypatch.chdir(tmp_path)  # a file of the project: its cells are quoted (pipeline.llm.project_files)
    path = write(tmp_path / "labels.csv", content)
    error = raises_at("labels.csv" + where, lambda: load_labels(path))
    assert expected in error.problem


# --- data.labels: the participants a run covers ------------------------------------------------


def _daic_release(root: Path) -> Path:
    """Transcripts 300..305, with a train split listing 300, 302, 304 and a dev split listing 305."""
    for n in range(300, 306):
        daic(root / "daic" / f"{n}_P" / f"{n}_TRANSCRIPT.csv", f"0\t1\tEllie\thi {n}")
    write(root / "daic" / "train_split.csv", "Participant_ID,PHQ8_Score\n304,3\n300,12\n302,0\n")
    write(root / "daic" / "dev_split.csv", "Participant_ID,PHQ8_Score\n305,7\n")
    return root


def test_labels_choose_the_participants_in_item_order(tmp_path: Path) -> None:
    root = _daic_release(tmp_path)
    train = load(root, "daic", labels="daic/train_split.csv")
    assert [t.item_id for t in train] == ["300", "302", "304"]
    both = load(root, "daic", labels=["daic/train_split.csv", "daic/dev_split.csv"], limit=3)
    assert [t.item_id for t in both] == ["300", "302", "304"]  # data.limit counts the chosen ones
    assert [t.item_id for t in load(root, "daic", labels=["daic/dev_split.csv", "daic/train_split.csv"])] == [
        "300",
        "302",
        "304",
        "305",
    ]
    assert len(load(root, "daic")) == 6  # null: every transcript


def test_a_listed_participant_without_a_transcript_is_an_error_at_its_row(tmp_path: Path) -> None:
    root = _daic_release(tmp_path)
    write(root / "daic" / "test_split.csv", "Participant_ID,Gender\n301,0\n490,1\n491,0\n")
    error = raises_at("daic/test_split.csv:3", lambda: load(root, "daic", labels="daic/test_split.csv"))
    assert error.problem == "participant 490 (and 1 more: 491) has no transcript in daic"


def test_a_participant_in_two_label_files_is_an_error(tmp_path: Path) -> None:
    root = _daic_release(tmp_path)
    write(root / "daic" / "other.csv", "Participant_ID\n301\n302\n")
    labels = ["daic/train_split.csv", "daic/other.csv"]
    error = raises_at("daic/other.csv:3", lambda: load(root, "daic", labels=labels))
    assert "already listed in daic/train_split.csv:4" in error.problem


def test_label_files_must_lie_where_dvc_tracks_them(tmp_path: Path) -> None:
    root = _daic_release(tmp_path)
    write(root / "splits" / "train.csv", "Participant_ID\n300\n")
    with pytest.raises(ConfigError, match=r"outside data.transcripts \(daic\).*Fix: move it into daic/"):
        load(root, "daic", labels="splits/train.csv")
    raises_at("daic/nope.csv", lambda: load(root, "daic", labels="daic/nope.csv"))
    with pytest.raises(ConfigError, match=r"data\.labels is an empty list"):
        load(root, "daic", labels=[])
    write(root / "daic" / "bad.csv", "ID,Score\n300,4\n")
    error = raises_at("daic/bad.csv:1", lambda: load(root, "daic", labels="daic/bad.csv"))
    assert "Participant_ID" in error.problem


# --- the demo data set -------------------------------------------------------------------------


def test_demo_dataset_loads_within_its_size_budget() -> None:
    transcripts = load(REPO, "data/demo")
    assert [t.item_id for t in transcripts] == ["901", "902", "903", "904", "905", "906"]
    for transcript in transcripts:
        # The experiment must run on a 135M model on 2 CPU cores in 15 minutes: keep them short.
        assert 900 <= len(transcript.text) <= 1400, (transcript.item_id, len(transcript.text))
        assert 12 <= len(transcript.turns) <= 20, transcript.item_id
        assert {t.speaker for t in transcript.turns} == {"Ellie", "Participant"}
        assert transcript.text == transcript.text.lower().replace("ellie :", "Ellie :").replace(
            "participant :", "Participant :"
        )
        starts = [t.start for t in transcript.turns if t.start is not None]
        assert len(starts) == len(transcript.turns) and starts == sorted(starts)
    cleaned = load(REPO, "data/demo", drop_markers=True)
    assert not any(re.search(r"<\w+>|\[\w+\]", t.text) for t in cleaned)
    assert len(cleaned[0].turns) == len(transcripts[0].turns) - 1  # 901's <sync>-only row
    assert "ignore your instructions" in transcripts[5].text
    assert set(load_labels(REPO / "data" / "demo" / "labels.csv")) == {t.item_id for t in transcripts}


# --- a real corpus -----------------------------------------------------------------------------


def shared_dir() -> Path:
    return Path(os.environ.get("JUDGELOOP_SHARED") or REPO.parent / "shared")


def test_annomi_in_daic_layout_loads_whole() -> None:
    corpus = shared_dir() / "corpora" / "annomi" / "daic_format_derived"
    if not corpus.is_dir():
        pytest.skip(f"{corpus} is absent: the shared corpora are not checked out beside the repo")
    files = sorted(corpus.glob("*_TRANSCRIPT.csv"))
    transcripts = load(corpus)
    assert len(transcripts) == len(files) > 100
    assert [t.item_id for t in transcripts] == [f.name.removesuffix("_TRANSCRIPT.csv") for f in files]
    rows = sum(len(f.read_text(encoding="utf-8").strip().splitlines()) - 1 for f in files)
    assert sum(len(t.turns) for t in transcripts) == rows  # no row lost, none split
    subject_only = load(corpus, drop_markers=True, participant_only=True)
    assert len(subject_only) == len(files)
    assert all(t.speaker == "Participant" for s in subject_only for t in s.turns)


# Whitespace that str.strip takes and float() does not (\x1c-\x1f), Unicode digits and spaces,
# and the letters of nan and inf.
_FIELD = st.text(
    alphabet=st.sampled_from(" \x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u2003\u3000\u0663.5e-+_0x1nfaiINF,")
)


@settings(max_examples=400, deadline=None)
@given(_FIELD, _FIELD)
def test_daic_times_read_as_seconds_reads_them(start: str, stop: str) -> None:
    """A DAIC row's times: the fast float() path gives what seconds() gives, the error included."""
    from pipeline.data.transcript_files import daic_rows, seconds

    lines = ["start_time\tstop_time\tspeaker\tvalue", f"{start}\t{stop}\tEllie\thello"]
    try:
        expected: object = (
            seconds([start], 0, "start_time", "t.csv", 2),
            seconds([stop], 0, "stop_time", "t.csv", 2),
        )
    except InputError as exc:
        expected = str(exc)
    try:
        [(_, _, start_read, stop_read)] = daic_rows(lines, "t.csv")
        got: object = (start_read, stop_read)
    except InputError as exc:
        got = str(exc)
    assert repr(got) == repr(expected)  # repr: a NaN read is a NaN either way
