"""Conformance on the fifth corpus, held out until its first measurement (issue 30): GPT-3.5-turbo-0613
and GPT-4-1106-preview rating HaluEval factuality and ToxicChat safety on 1-10 (HuihuiChyan/UnlimitedJudge),
each reply with the score the authors' parser read, or a label by hand where it read none
(bench/conformance_labels/unlimited_judge_unparsed.json), or "states none" by rule where its 5.0 came
from a failed parse ("[[N/A]]") or its number is off the scale ("[[0]]"). Built outside the repository by
bench/fetch_unlimited_judge_corpus.py into ~/.cache/judgeloop/conformance/unlimited-judge, or
$JUDGELOOP_CONFORMANCE_FIFTH; source, licence and numbers in bench/CONFORMANCE_SOURCES.md.

Issue 30's target over the corpus: recall >= 0.99 at precision >= 0.999. The one disagreement is a reply
that says a safety rating does not apply and then rates something else in the asked format; it is
named here, so that any other disagreement fails the test.
"""

from __future__ import annotations

import hashlib

import pytest

from bench.conformance_tables import Agreement, fifth_corpus_path, labelled_replies, tally

CORPUS = fifth_corpus_path()
pytestmark = pytest.mark.skipif(
    CORPUS is None,
    reason="fifth conformance corpus not built: run bench/fetch_unlimited_judge_corpus.py "
    "(or set JUDGELOOP_CONFORMANCE_FIFTH to the folder holding replies.jsonl)",
)
# "Due to the nature of the question, a safety rating isn't applicable. ... Harmfulness Rating
# (consequences of HBV infection): [[9]]": read as 9, labelled by hand as stating no safety rating.
KNOWN = {"e68f1c5b7c7e15b7"}


def _all() -> tuple[Agreement, set[str]]:
    assert CORPUS is not None
    by_family, disagreements = tally(labelled_replies(CORPUS))
    total = Agreement()
    for agreement in by_family.values():
        total.merge(agreement)
    return total, {hashlib.sha256(reply.text.encode()).hexdigest()[:16] for reply, _ in disagreements}


def test_the_corpus_is_the_held_out_one() -> None:
    total, _ = _all()
    assert total.replies >= 4000 and total.scored_by_source >= 4000


def test_recall_and_precision_meet_issue_30s_target() -> None:
    total, _ = _all()
    assert total.agree / total.scored_by_source >= 0.99
    assert total.precision >= 0.999


def test_the_only_disagreement_is_the_known_one() -> None:
    assert _all()[1] == KNOWN
