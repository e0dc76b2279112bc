"""Conformance of the score extractor with the authors' own parsers, on real judge replies.

The corpora stay outside the repository (research releases; never copied in, never committed):
../shared/corpora/judge-replies beside the checkout, or $JUDGELOOP_SHARED/corpora/judge-replies.

    closer_look_llm_eval      GPT-3.5 on Topical-Chat (Chiang & Lee 2023); 1-3 scales, groundedness 0-1;
                              the authors' parse_output() in `authors_parse_output`. Only the 10k sample
                              and the 2,670 non-standard replies here; bench/extractor_conformance.py
                              runs all 200k.
    dreaming_panda_mtbench,   GPT-4 MT-Bench single grading, "Rating: [[N]]" on 1-10 (8.5 occurs);
    medusa_mtbench_judgments  FastChat's parse in `score`, -1 = API error.

precision: of the scores we return where the authors parsed one, the fraction equal to theirs.
recall:    of the rows the authors parsed, the fraction we read with the same value.

The authors' parsers are a reference, not the truth. Chiang & Lee's takes the first digit after the
last "rating:" (else anywhere), truncates 0.5 to 0, and keeps 3 on a 0-1 scale; we abstain where it
guesses, and read "1. Engagingness: 2" as 2 where it reads 1. So the closer-look floors measure how
often we agree on clean replies, not correctness, and recall on the non-standard replies is low by
design. The floors are the measured values (extractor of this commit) minus a small margin.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipeline.judges.scores import Scale, ScoreReading, extract_score


def _corpora() -> Path:
    shared = os.environ.get("JUDGELOOP_SHARED")
    base = Path(shared) if shared else Path(__file__).resolve().parents[1].parent / "shared"
    return base / "corpora" / "judge-replies"


CORPORA = _corpora()
pytestmark = pytest.mark.skipif(
    not CORPORA.is_dir(),
    reason=f"judge-reply corpora not found at {CORPORA} (set JUDGELOOP_SHARED to the shared dir; CI has it)",
)

CLOSER_LOOK_SCALES = {
    "coherence": Scale(1, 3),
    "engagingness": Scale(1, 3),
    "naturalness": Scale(1, 3),
    "groundedness": Scale(0, 1),
}
MT_BENCH_SCALE = Scale(1, 10, integer=False)


@dataclass(frozen=True)
class Row:
    text: str
    authors: float | None
    scale: Scale
    labels: tuple[str, ...]


def _lines(path: Path) -> list[dict[str, object]]:
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def _closer_look(name: str) -> list[Row]:
    rows = []
    for record in _lines(CORPORA / "closer_look_llm_eval" / name):
        dimension = str(record["dimension"])
        authors = record["authors_parse_output"]
        # The G-Eval style prompts end with "- Coherence:", so the dimension is a label there.
        rows.append(
            Row(
                str(record["response"]),
                None if authors is None else float(str(authors)),
                CLOSER_LOOK_SCALES[dimension],
                (dimension,),
            )
        )
    return rows


def _mt_bench() -> list[Row]:
    rows = []
    for path in (
        CORPORA / "dreaming_panda_mtbench" / "gpt-4_single-origin.jsonl",
        CORPORA / "dreaming_panda_mtbench" / "gpt-4_single.jsonl",
        CORPORA / "medusa_mtbench_judgments" / "gpt-4_single.jsonl",
    ):
        for record in _lines(path):
            score = float(str(record["score"]))
            rows.append(Row(str(record["judgment"]), None if score == -1 else score, MT_BENCH_SCALE, ()))
    return rows


@dataclass(frozen=True)
class Agreement:
    rows: int
    precision: float
    recall: float
    extra: int  # rows we read and the authors did not
    disagreements: Counter[str]


def _agreement(rows: list[Row]) -> Agreement:
    authors_parsed = both = agree = extra = 0
    disagreements: Counter[str] = Counter()
    for row in rows:
        reading: ScoreReading = extract_score(row.text, row.scale, labels=row.labels)
        if row.authors is None:
            extra += reading.score is not None
            continue
        authors_parsed += 1
        if reading.score is None:
            disagreements[f"abstain:{reading.reason}"] += 1
            continue
        both += 1
        if float(reading.score) == row.authors:
            agree += 1
        else:
            disagreements["different value"] += 1
    return Agreement(len(rows), agree / both, agree / authors_parsed, extra, disagreements)


def _load(corpus: str) -> list[Row]:
    if corpus.startswith("MT-Bench"):
        return _mt_bench()
    if corpus.startswith("closer_look sample"):
        return _closer_look("sample_first_response_per_item.jsonl")
    return _closer_look("edge_cases_nonstandard_format.jsonl")


# corpus: (precision floor, recall floor, most rows read that the authors' parser did not)
# Measured: sample 0.9999 / 0.9918 / 0; non-standard 0.9747 / 0.7218 / 0; MT-Bench 1.0 / 1.0 / 0.
FLOORS = {
    "closer_look sample (10k)": (0.995, 0.98, 2),
    "closer_look non-standard (2.7k)": (0.96, 0.70, 5),
    "MT-Bench GPT-4 (970)": (0.99, 0.99, 0),
}


@pytest.mark.parametrize("corpus", list(FLOORS))
def test_agreement_with_the_authors_parse(corpus: str) -> None:
    precision_floor, recall_floor, max_extra = FLOORS[corpus]
    rows = _load(corpus)
    assert rows, f"{corpus}: no rows"
    result = _agreement(rows)
    summary = f"{corpus}: {result}"
    assert result.precision >= precision_floor, summary
    assert result.recall >= recall_floor, summary
    assert result.extra <= max_extra, summary


def test_mt_bench_error_sentinels_are_unscored() -> None:
    errors = [row for row in _mt_bench() if row.text.strip() == "$ERROR$"]
    assert errors, "the corpus has 4 $ERROR$ judgments"
    assert all(extract_score(row.text, row.scale).score is None for row in errors)


def test_mt_bench_half_points_need_a_non_integer_scale() -> None:
    halves = [row for row in _mt_bench() if row.authors is not None and not row.authors.is_integer()]
    assert halves, "the corpus has 8.5 and 9.5 ratings"
    for row in halves:
        assert extract_score(row.text, MT_BENCH_SCALE).score == row.authors
        assert extract_score(row.text, Scale(1, 10)).reason == "non_integer"
