"""Fuzzing every data reader of every design (transcripts, labels, RAG rows and answers, listening
requests, catalog, SummEval) and the replies a judge returns (structured JSON, and the score in
text). See tests/fuzz/support.py for the property and the example counts."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.data.catalog import load_catalog
from pipeline.data.labels import load_labels
from pipeline.data.listening_requests import load_requests
from pipeline.data.rag_rows import load_rag_rows
from pipeline.data.settings import DataSettings
from pipeline.data.summeval import load_summeval
from pipeline.data.transcripts import load_transcripts
from pipeline.errors import InputError
from pipeline.experiments.rag.batch import read_batch
from pipeline.experiments.rag.judge_evaluate import read_answer
from pipeline.experiments.rag.settings import DEFAULT_DIMENSIONS
from pipeline.judges.rubric.judge import read_score, rubric_reply_model
from pipeline.judges.scores.extract import extract_score
from pipeline.judges.structured.dimensions import reply_model
from pipeline.llm.structured import check_reply
from pipeline.llm.types import ChatReply
from pipeline.tools.calibrate import read_human, read_scores
from tests.fuzz.support import clear_or_correct, committed, fuzz, inputs, mixed_texts, only_inside

TRANSCRIPT = committed("data/demo/901_P/901_TRANSCRIPT.csv")
SPEAKER_LINES = b"Ellie: how are you doing today\nParticipant: pretty good actually\n"
JSONL_TRANSCRIPT = (
    b'{"id": "a1", "turns": [{"speaker": "Ellie", "text": "hi"}]}\n{"id": 7, "text": "Ellie: hi"}\n'
)
RAG_ANSWER = b'{"answer": "Run it with --port 8081.", "sources_used": ["docs/serve.md"], "confidence": 0.9}'


def _read(sandbox: Path, name: str, data: bytes, reader: Callable[[Path], Any]) -> None:
    path = sandbox / "data" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    clear_or_correct(lambda: reader(path))
    only_inside(sandbox.parent, sandbox)


@fuzz
@given(data=st.data())
def test_transcripts(sandbox: Path, data: st.DataObject) -> None:
    name, seed = data.draw(
        st.sampled_from(
            [("901_TRANSCRIPT.csv", TRANSCRIPT), ("902.txt", SPEAKER_LINES), ("all.jsonl", JSONL_TRANSCRIPT)]
        )
    )
    folder = sandbox / "data" / "transcripts"
    if folder.exists():
        for old in folder.iterdir():
            old.unlink()
    _read(
        sandbox,
        f"transcripts/{name}",
        data.draw(inputs(seed)),
        lambda path: load_transcripts(DataSettings(transcripts=str(path.parent)), sandbox),
    )


@fuzz
@given(data=inputs(committed("data/demo/labels.csv")))
def test_labels(sandbox: Path, data: bytes) -> None:
    _read(sandbox, "labels.csv", data, load_labels)


@fuzz
@given(data=inputs(committed("data/rag-demo/rows.jsonl")))
def test_rag_rows(sandbox: Path, data: bytes) -> None:
    _read(sandbox, "rows.jsonl", data, load_rag_rows)
    _read(sandbox, "batch.jsonl", data, read_batch)


@fuzz
@given(data=inputs(RAG_ANSWER, b"A plain answer.\n"))
def test_a_rag_answer_file(sandbox: Path, data: bytes) -> None:
    _read(sandbox, "answer.json", data, read_answer)


@fuzz
@given(data=inputs(committed("data/selection/requests.yaml")))
def test_listening_requests(sandbox: Path, data: bytes) -> None:
    _read(sandbox, "requests.yaml", data, load_requests)


@fuzz
@given(data=inputs(committed("data/selection/catalog_fictional.csv")[:6000]))
def test_the_catalog(sandbox: Path, data: bytes) -> None:
    _read(sandbox, "catalog.csv", data, load_catalog)


@fuzz
@given(data=inputs(committed("data/summeval-demo/summeval-demo.jsonl")[:8000]))
def test_summeval(sandbox: Path, data: bytes) -> None:
    _read(sandbox, "summeval.jsonl", data, load_summeval)


_SUMMEVAL = committed("data/summeval-demo/summeval-demo.jsonl")[:8000]


@fuzz
@given(data=inputs(gzip.compress(_SUMMEVAL, mtime=0)), packed=inputs(_SUMMEVAL))
def test_summeval_packed(sandbox: Path, data: bytes, packed: bytes) -> None:
    """The annotations as .jsonl.gz (what SummEval ships): the packed bytes edited (a damaged
    stream, a truncated one, another format), and edited text packed whole."""
    _read(sandbox, "summeval.jsonl.gz", data, load_summeval)
    _read(sandbox, "summeval.jsonl.gz", gzip.compress(packed, mtime=0), load_summeval)


def test_a_damaged_packed_summeval_file_is_refused_naming_it(sandbox: Path) -> None:
    """Found by the property above: a deflate stream damaged inside (zlib.error, neither the OSError
    nor the EOFError the reader caught) gave a traceback."""
    packed = bytearray(gzip.compress(_SUMMEVAL, mtime=0))
    packed[20:40] = b"\xff" * 20
    path = sandbox / "data" / "damaged.jsonl.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(packed))
    with pytest.raises(InputError, match=r"damaged\.jsonl\.gz"):
        load_summeval(path)


HUMAN = (
    b'{"item": "i0", "metric": "coherence", "ratings": [1, 2]}\n'
    b'{"item": "i1", "metric": "coherence", "ratings": [3, 4]}\n'
)
SCORES = (
    b'{"item": "i0", "group": "g0", "system": "s0", "metric": "coherence", "score": 1}\n'
    b'{"item": "i1", "group": "g1", "system": "s1", "metric": "coherence", "score": 4.5, '
    b'"weighted_score": 4.2}\n'
)


@fuzz
@given(human=inputs(HUMAN), scores=inputs(SCORES))
def test_calibration_files(sandbox: Path, human: bytes, scores: bytes) -> None:
    _read(sandbox, "human.jsonl", human, read_human)
    _read(sandbox, "scores.jsonl", scores, read_scores)


# -- the replies a judge returns ------------------------------------------------------------------

STRUCTURED = (
    b'{"faithfulness": 4, "relevance": 5, "completeness": 3, "reasoning": "grounded", "confidence": 0.8}'
)
RUBRIC = b'{"explanation": "The assessment covers sleep.", "score": 3}'


@fuzz
@given(text=st.one_of(inputs(STRUCTURED, RUBRIC).map(lambda b: b.decode("utf-8", "replace")), mixed_texts))
def test_a_judge_s_structured_reply(text: str) -> None:
    for model in (reply_model(DEFAULT_DIMENSIONS), rubric_reply_model(None), rubric_reply_model(200)):
        for done_reason in ("stop", "length"):
            reply = ChatReply(text=text, done_reason=done_reason)
            clear_or_correct(lambda reply=reply, model=model: check_reply(reply, model))  # type: ignore[misc]


@fuzz
@given(
    text=st.one_of(
        mixed_texts, inputs(b"Score: 4/5\nExplanation: fine.").map(lambda b: b.decode("utf-8", "replace"))
    )
)
def test_a_judge_s_score_in_text(text: str) -> None:
    clear_or_correct(lambda: extract_score(text))
    clear_or_correct(lambda: read_score(text, "accuracy"))
    clear_or_correct(lambda: read_score(text, "accuracy", "round"))


def test_the_seeds_are_read_as_they_are(sandbox: Path) -> None:
    """Each edited seed starts from a file its reader accepts, so the edits reach past the first check."""
    seeds: list[tuple[str, bytes, Callable[[Path], Any]]] = [
        ("labels.csv", committed("data/demo/labels.csv"), load_labels),
        ("rows.jsonl", committed("data/rag-demo/rows.jsonl"), load_rag_rows),
        ("answer.json", RAG_ANSWER, read_answer),
        ("requests.yaml", committed("data/selection/requests.yaml"), load_requests),
        ("catalog.csv", committed("data/selection/catalog_fictional.csv"), load_catalog),
        ("summeval.jsonl", committed("data/summeval-demo/summeval-demo.jsonl"), load_summeval),
        ("human.jsonl", HUMAN, read_human),
        ("scores.jsonl", SCORES, read_scores),
    ]
    for name, seed, reader in seeds:
        path = sandbox / "seeds" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(seed)
        assert reader(path), name
    for name, seed in (
        ("901_TRANSCRIPT.csv", TRANSCRIPT),
        ("902.txt", SPEAKER_LINES),
        ("a.jsonl", JSONL_TRANSCRIPT),
    ):
        folder = sandbox / "seeds" / name.replace(".", "_")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(seed)
        assert load_transcripts(DataSettings(transcripts=str(folder)), sandbox), name
    assert not isinstance(
        check_reply(ChatReply(text=STRUCTURED.decode()), reply_model(DEFAULT_DIMENSIONS)), str
    )
    assert extract_score("Score: 4/5").score == 4
