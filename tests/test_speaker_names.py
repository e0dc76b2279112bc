"""The speakers the paper's prompts name are params (data.interviewer, data.participant): the
defaults give the prompts byte for byte, other names reach the prompts, and transcripts whose
speakers differ are warned about (issue 32, item 5)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from pipeline.data.input_files import InputWarning
from pipeline.data.settings import DataSettings
from pipeline.data.transcripts import load_transcripts
from pipeline.judges.rubric.prompts import ASSESS_PROMPT, REFINE_PROMPT, SPEAKERS_NOTE, with_speakers
from tests.conftest import ROOT


def test_the_default_names_give_the_prompts_unchanged() -> None:
    assert SPEAKERS_NOTE in ASSESS_PROMPT and SPEAKERS_NOTE in REFINE_PROMPT
    assert with_speakers(ASSESS_PROMPT, "Ellie", "Participant") is ASSESS_PROMPT
    named = with_speakers(ASSESS_PROMPT, "Interviewer", "Patient {x}")
    assert "'Interviewer' is the interviewer, and 'Patient {x}' is the subject" in named.format(
        transcript="t"
    )
    assert "Ellie" not in named


def test_transcripts_whose_speakers_differ_are_warned_about(tmp_path: Path) -> None:
    (tmp_path / "p01.txt").write_text("Interviewer: how do you sleep\nPatient: badly\n", encoding="utf-8")
    with pytest.warns(InputWarning, match=r"data\.interviewer and data\.participant"):
        loaded = load_transcripts(DataSettings(transcripts=str(tmp_path)))
    assert (loaded[0].interviewer, loaded[0].participant) == ("Ellie", "Participant")
    named = DataSettings(transcripts=str(tmp_path), interviewer="Interviewer", participant="Patient")
    with warnings.catch_warnings():
        warnings.simplefilter("error", InputWarning)
        assert load_transcripts(named)[0].interviewer == "Interviewer"


def test_the_demo_data_names_the_default_speakers() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", InputWarning)
        load_transcripts(DataSettings(transcripts=str(ROOT / "data" / "demo")))
