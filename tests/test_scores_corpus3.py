"""Conformance on the third corpus: an open chat-tuned judge that writes its verdicts as sentences.

Vicuna-13B grading single answers 1-10 with FastChat's MT-Bench prompt, and GPT-3.5/GPT-4 with the
same prompt (HuihuiChyan/UnifiedBias), each reply with the score its source's parser read or, where
that parser found none, a score read by hand (bench/conformance_labels/unifiedbias_unparsed.json).
Built outside the repository by bench/fetch_open_judge_corpus.py into
~/.cache/judgeloop/conformance/open-judges, or $JUDGELOOP_CONFORMANCE_OPEN; sources and licence in
bench/CONFORMANCE_SOURCES.md.

Issue 23's targets, per family and per reading kind: precision >= 0.999 and recall >= 0.99 of the
replies that state a score. The source's parser misreads two shapes ("Rating: 8.5" as 8, "Rating: 10"
as 1); those disagreements are label errors (bench.conformance_tables.label_error), counted apart,
and every other disagreement fails the test.
"""

from __future__ import annotations

import pytest

from bench.conformance_tables import (
    Agreement,
    by_label_origin,
    label_error,
    labelled_replies,
    tally,
    third_corpus_path,
)

CORPUS = third_corpus_path()
pytestmark = pytest.mark.skipif(
    CORPUS is None,
    reason="third conformance corpus not built: run bench/fetch_open_judge_corpus.py "
    "(or set JUDGELOOP_CONFORMANCE_OPEN to the folder holding replies.jsonl)",
)
PRECISION_FLOOR = 0.999
RECALL_FLOOR = 0.99


def _tally(by_origin: bool = False) -> tuple[dict[tuple[str, str], Agreement], list[str]]:
    assert CORPUS is not None
    replies = list(labelled_replies(CORPUS))
    by_family, disagreements = tally(replies, by_label_origin) if by_origin else tally(replies)
    unexplained = [
        f"{reply.family}: label {reply.label} ({reply.label_by}), read {reading.score} ({reading.reason})"
        for reply, reading in disagreements
        if label_error(reply, reading) is None
    ]
    return by_family, unexplained


def test_the_corpus_is_an_open_judge_with_enough_replies() -> None:
    by_family, _ = _tally()
    vicuna = [agreement for (_, family), agreement in by_family.items() if family.startswith("vicuna")]
    assert sum(agreement.replies for agreement in vicuna) >= 3000


def test_every_disagreement_is_a_known_label_error() -> None:
    assert _tally()[1] == []


@pytest.mark.parametrize("by_origin", [False, True], ids=["by family", "by family and label origin"])
def test_every_family_meets_the_targets(by_origin: bool) -> None:
    for (split, family), agreement in _tally(by_origin)[0].items():
        where = f"{split} {family}"
        for reason, scored in agreement.scored_by_reason.items():
            precision = agreement.precision_of(reason, label_errors_out=True)
            assert precision >= PRECISION_FLOOR, (where, reason, scored, agreement)
        if agreement.scored_by_source:
            assert agreement.recall_of(label_errors_out=True) >= RECALL_FLOOR, (where, agreement)


def test_the_prose_verdicts_are_read() -> None:
    """The replies the source's parser could not read, which state their score in a sentence."""
    by_origin, _ = _tally(by_origin=True)
    hand = {key: a for key, a in by_origin.items() if key[1].startswith("vicuna") and key[1].endswith("hand")}
    assert sum(a.scored_by_source for a in hand.values()) >= 450
    for agreement in hand.values():
        assert agreement.reasons["fraction_verb"] > 0
        assert agreement.recall_of() >= RECALL_FLOOR
