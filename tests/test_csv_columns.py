"""A CSV data file whose header gives a column it reads twice (or two names of one field) is
refused, naming the file, line 1, both columns and the fix: a reader keeping columns by name took
the last silently (pipeline.data.input_files.repeated_column)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.data.catalog import load_catalog
from pipeline.data.input_files import repeated_column
from pipeline.data.labels import load_labels
from pipeline.data.settings import DataSettings
from pipeline.data.transcripts import load_transcripts
from pipeline.errors import InputError
from tests.conftest import ROOT

FIX = "Fix: keep one of the two columns (delete or rename the other)"


def _refused(call: object, where: str, problem: str) -> None:
    assert callable(call)
    with pytest.raises(InputError) as raised:
        call()
    assert str(raised.value) == f"{where}: {problem}. {FIX}"


def test_repeated_column_names_the_first_two_read_as_one() -> None:
    header = ["a", "x", "b", "x", "a"]
    assert repeated_column(header, [None, None, None, None, None]) is None  # ignored columns may repeat
    assert (
        repeated_column(header, ["a", None, "b", None, "a"])
        == "the column 'a' is given twice (columns 1 and 5)"
    )
    assert (
        repeated_column(["p8", "p"], ["score", "score"])
        == "columns 1 and 2, 'p8' and 'p', both give the score"
    )


def test_a_transcript_with_two_value_columns_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "301_TRANSCRIPT.csv").write_text(
        "start_time\tstop_time\tspeaker\tvalue\tvalue\n1\t2\tEllie\thi\tbye\n", encoding="utf-8"
    )
    _refused(
        lambda: load_transcripts(DataSettings(transcripts="data"), tmp_path),
        "data/301_TRANSCRIPT.csv:1",
        "the column 'value' is given twice (columns 4 and 5)",
    )


def test_a_label_file_giving_a_score_under_two_names_is_refused(tmp_path: Path) -> None:
    labels = tmp_path / "split.csv"
    labels.write_text("Participant_ID,PHQ8_Score,PHQ_Score\n301,4,20\n", encoding="utf-8")
    _refused(
        lambda: load_labels(labels),
        f"{labels}:1",
        "columns 2 and 3, 'phq8_score' and 'phq_score', both give the score",
    )


def test_a_catalog_giving_a_column_twice_is_refused(tmp_path: Path) -> None:
    lines = (ROOT / "data" / "selection" / "catalog_fictional.csv").read_text("utf-8").splitlines()
    catalog = tmp_path / "catalog.csv"
    catalog.write_text("\n".join([lines[0] + ",energy", *(line + ",0.1" for line in lines[1:])]) + "\n")
    at = lines[0].split(",").index("energy") + 1
    width = len(lines[0].split(",")) + 1
    _refused(
        lambda: load_catalog(catalog),
        f"{catalog}:1",
        f"the column 'energy' is given twice (columns {at} and {width})",
    )


def test_columns_a_reader_ignores_may_repeat_and_the_demos_load(tmp_path: Path) -> None:
    labels = tmp_path / "split.csv"
    labels.write_text("Participant_ID,note,note,PHQ8_Score\n301,a,b,4\n", encoding="utf-8")
    assert load_labels(labels)["301"].score == 4
    assert load_catalog(ROOT / "data" / "selection" / "catalog_fictional.csv")
    assert load_labels(ROOT / "data" / "demo" / "labels.csv")
    assert load_transcripts(DataSettings(transcripts="data/demo"), ROOT)


@pytest.mark.parametrize(
    "cell", ["1_0", "\u0661\u0660", "\uff11\uff10"]
)  # 1_0, Arabic-Indic 10, full-width 10
def test_a_label_python_alone_reads_as_a_number_is_refused(tmp_path: Path, cell: str) -> None:
    """float() reads each as 10; a spreadsheet and pandas read text. A PHQ-8 score no other tool
    sees is refused, naming the cell (pipeline.data.input_files.plain_number)."""
    labels = tmp_path / "split.csv"
    labels.write_text(f"Participant_ID,PHQ8_Score\n301,{cell}\n", encoding="utf-8")
    with pytest.raises(InputError) as raised:
        load_labels(labels)
    assert str(raised.value).startswith(f"{labels}:2: phq8_score is ")
    assert "not a whole number from 0 to 24" in str(raised.value)


@pytest.mark.parametrize("cell", ["0.5_5", "0.\uff15"])  # 0.55 to float(); full-width 5
def test_a_catalog_value_python_alone_reads_as_a_number_is_refused(tmp_path: Path, cell: str) -> None:
    lines = (ROOT / "data" / "selection" / "catalog_fictional.csv").read_text("utf-8").splitlines()
    at = lines[0].split(",").index("energy")
    cells = lines[1].split(",")
    assert '"' not in lines[1] and float(cells[at]) <= 1  # no quoted field: the split is the row's
    cells[at] = cell
    catalog = tmp_path / "catalog.csv"
    catalog.write_text("\n".join([lines[0], ",".join(cells), *lines[2:]]) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as raised:
        load_catalog(catalog)
    assert str(raised.value).startswith(f"{catalog}:2: energy is ")
    assert "not a number from 0 to 1" in str(raised.value)
