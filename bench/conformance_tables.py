"""Per-family and per-reading-kind agreement of extract_score with each source's own score.

Used by bench/extractor_conformance.py for the three corpora: ../shared/corpora/judge-replies (the one
the extractor was developed against), the second corpus built by bench/fetch_conformance_corpus.py
(judge families not in the first) and the third built by bench/fetch_open_judge_corpus.py (an open
chat-tuned judge writing its verdicts as sentences). The "dev" part of a corpus may be used to tune
the grammar, its "held_out" part never is (bench/CONFORMANCE_SOURCES.md says which is which).

precision  of the replies we read with this reason and that carry a label, the fraction equal to it;
           a reply labelled by hand as stating no score counts against us when we read one
recall     of the replies whose label is a score, the fraction we read with the same value

A label is the source's parser's output ("source") or, where that parser found nothing, a score read
by hand ("hand"). Some sources' parsers misread what the reply says; those disagreements are counted
apart as label errors (``label_error``), and each table gives precision and recall with them too.
"""

from __future__ import annotations

import json
import math
import os
import random
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.judges.scores import READ_REASONS, Scale, ScoreReading, extract_score


@dataclass(frozen=True)
class LabelledReply:
    family: str
    split: str
    text: str
    label: float | None
    scale: Scale
    labels: tuple[str, ...] = ()
    states_score: bool = True
    # "hand": the source's parser found none, read by hand; "rule": the source's parser failed in a way
    # that shows the reply states no score (corpus 5's "[[N/A]]"); None then means "states none".
    label_by: str = "source"

    @property
    def states_none(self) -> bool:
        return self.label is None and self.label_by in ("hand", "rule")


def _corpus_file(variable: str, default: Path) -> Path | None:
    configured = os.environ.get(variable)
    path = (Path(configured) if configured else default) / "replies.jsonl"
    return path if path.is_file() else None


def second_corpus_path() -> Path | None:
    beside = Path(__file__).resolve().parents[1].parent / "shared-local" / "corpora" / "judge-replies-2"
    return _corpus_file("JUDGELOOP_CONFORMANCE", beside)


def third_corpus_path() -> Path | None:
    return _corpus_file(
        "JUDGELOOP_CONFORMANCE_OPEN", Path.home() / ".cache" / "judgeloop" / "conformance" / "open-judges"
    )


def fifth_corpus_path() -> Path | None:
    return _corpus_file(
        "JUDGELOOP_CONFORMANCE_FIFTH",
        Path.home() / ".cache" / "judgeloop" / "conformance" / "unlimited-judge",
    )


def labelled_replies(path: Path) -> Iterator[LabelledReply]:
    """The replies of a corpus built by bench/fetch_conformance_corpus.py or fetch_open_judge_corpus.py."""
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            scale = row["scale"]
            yield LabelledReply(
                family=row["family"],
                split=row["split"],
                text=row["text"],
                label=row["label"],
                scale=Scale(scale["min"], scale["max"], scale["integer"]),
                labels=tuple(row["labels"]),
                states_score=row["states_score"],
                label_by=row.get("label_by", "source"),
            )


second_corpus = labelled_replies  # the name the second corpus's test and bench use


def label_error(reply: LabelledReply, reading: ScoreReading) -> str | None:
    """Why the source's label, not our reading, is wrong, where its parser is known to misread."""
    if reply.label is None or reading.score is None or reply.label_by != "source":
        return None
    read = float(reading.score)
    if read != reply.label and math.floor(read) == reply.label and not read.is_integer():
        return "the source's parser keeps the integer part ('Rating: 8.5' read as 8)"
    if (read, reply.label) == (10.0, 1.0):
        return "the source's parser reads one digit ('Rating: 10' read as 1)"
    return None


@dataclass
class Agreement:
    replies: int = 0
    scored_by_source: int = 0
    read: int = 0
    read_and_scored: int = 0
    agree: int = 0
    label_errors: int = 0  # disagreements explained by label_error
    reasons: Counter[str] = field(default_factory=Counter)
    agree_by_reason: Counter[str] = field(default_factory=Counter)
    scored_by_reason: Counter[str] = field(default_factory=Counter)
    label_errors_by_reason: Counter[str] = field(default_factory=Counter)

    def add(self, reply: LabelledReply, reading: ScoreReading) -> None:
        self.replies += 1
        self.reasons[reading.reason] += 1
        source_scored = reply.label is not None and reply.states_score
        self.scored_by_source += source_scored
        if reading.score is None:
            return
        self.read += 1
        if reply.label is None and not reply.states_none:
            return
        same = reply.label is not None and float(reading.score) == reply.label
        error = label_error(reply, reading) is not None
        self.read_and_scored += 1
        self.scored_by_reason[reading.reason] += 1
        self.agree_by_reason[reading.reason] += same
        self.agree += same and source_scored
        self.label_errors += error and source_scored
        self.label_errors_by_reason[reading.reason] += error

    def merge(self, other: Agreement) -> None:
        for name in ("replies", "scored_by_source", "read", "read_and_scored", "agree", "label_errors"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in ("reasons", "agree_by_reason", "scored_by_reason", "label_errors_by_reason"):
            getattr(self, name).update(getattr(other, name))

    @property
    def precision(self) -> float:
        agreeing = sum(self.agree_by_reason.values())
        return agreeing / self.read_and_scored if self.read_and_scored else float("nan")

    @property
    def recall(self) -> float:
        return self.agree / self.scored_by_source if self.scored_by_source else float("nan")

    def precision_of(self, reason: str, *, label_errors_out: bool = False) -> float:
        """Of the replies read with ``reason``, the fraction that agree (or are the source's label errors)."""
        agreeing = self.agree_by_reason[reason]
        if label_errors_out:
            agreeing += self.label_errors_by_reason[reason]
        scored = self.scored_by_reason[reason]
        return agreeing / scored if scored else float("nan")

    def recall_of(self, *, label_errors_out: bool = False) -> float:
        agreeing = self.agree + (self.label_errors if label_errors_out else 0)
        return agreeing / self.scored_by_source if self.scored_by_source else float("nan")


def read(reply: LabelledReply) -> ScoreReading:
    return extract_score(reply.text, reply.scale, labels=reply.labels)


def by_split_and_family(reply: LabelledReply) -> tuple[str, str]:
    return reply.split, reply.family


def by_label_origin(reply: LabelledReply) -> tuple[str, str]:
    return reply.split, f"{reply.family}, label by {reply.label_by}"


def tally(
    replies: Iterable[LabelledReply],
    key: Callable[[LabelledReply], tuple[str, str]] = by_split_and_family,
) -> tuple[dict[tuple[str, str], Agreement], list[tuple[LabelledReply, ScoreReading]]]:
    by_family: dict[tuple[str, str], Agreement] = defaultdict(Agreement)
    disagreements: list[tuple[LabelledReply, ScoreReading]] = []
    for reply in replies:
        reading = read(reply)
        by_family[key(reply)].add(reply, reading)
        wrong = reading.score is not None and (
            (reply.label is not None and float(reading.score) != reply.label) or reply.states_none
        )
        missed = reading.score is None and reply.label is not None and reply.states_score
        if wrong or missed:
            disagreements.append((reply, reading))
    return by_family, disagreements


def _ratio(numerator: int, denominator: int) -> str:
    return f"{numerator / denominator:.4f} ({numerator}/{denominator})" if denominator else "—"


HEADER = ("split", "family", "replies", "source", "read", "precision", "recall", "label errors")


def _row(split: str, family: str, agreement: Agreement) -> str:
    precision = _ratio(sum(agreement.agree_by_reason.values()), agreement.read_and_scored)
    recall = _ratio(agreement.agree, agreement.scored_by_source)
    counts = f"{agreement.replies:>7} {agreement.scored_by_source:>7} {agreement.read:>7}"
    return f"{split:<15} {family:<52} {counts} {precision:>22} {recall:>22} {agreement.label_errors:>12}"


def _kind(total: Agreement, reason: str) -> str:
    errors = total.label_errors_by_reason[reason]
    explained = f" [+{errors} label errors]" if errors else ""
    return f"{reason} {_ratio(total.agree_by_reason[reason], total.scored_by_reason[reason])}{explained}"


def print_tables(title: str, by_family: dict[tuple[str, str], Agreement]) -> None:
    print(f"\n## {title}\n")
    split, family, *counts, precision, recall, errors = HEADER
    print(
        f"{split:<15} {family:<52} "
        + " ".join(f"{c:>7}" for c in counts)
        + f" {precision:>22} {recall:>22} {errors:>12}"
    )
    totals: dict[str, Agreement] = defaultdict(Agreement)
    for (split, family), agreement in sorted(by_family.items()):
        print(_row(split, family, agreement))
        totals[split].merge(agreement)
    for split, total in sorted(totals.items()):
        print(_row(split, "ALL", total))
    if any(agreement.label_errors for agreement in by_family.values()):
        print("\nWith the source's label errors counted as agreement (label_error explains each):")
        for (split, family), agreement in sorted(by_family.items()):
            if agreement.label_errors:
                scored = sum(agreement.scored_by_reason.values())
                agreeing = sum(agreement.agree_by_reason.values())
                agreeing += sum(agreement.label_errors_by_reason.values())
                recall = _ratio(agreement.agree + agreement.label_errors, agreement.scored_by_source)
                print(f"  {split:<13} {family:<52} precision {_ratio(agreeing, scored)}  recall {recall}")
    print("\nPer reading kind (precision: of the replies read with this reason that carry a label):")
    for split, total in sorted(totals.items()):
        kinds = ", ".join(_kind(total, reason) for reason in sorted(total.scored_by_reason))
        unread = ", ".join(f"{r}={n}" for r, n in total.reasons.most_common() if r not in READ_REASONS)
        print(f"  {split}: {kinds}\n  {split} not read: {unread}")


def print_disagreements(disagreements: list[tuple[LabelledReply, ScoreReading]], per_family: int = 4) -> None:
    grouped: dict[tuple[str, str, str], list[tuple[LabelledReply, ScoreReading]]] = defaultdict(list)
    for reply, reading in disagreements:
        error = label_error(reply, reading)
        if error is not None:
            kind = f"label error: {error}"
        elif reading.score is not None and reply.label is not None:
            kind = "we read a different value"
        elif reading.score is not None:
            kind = "we read, the hand label says none"
        else:
            kind = f"we abstain ({reading.reason})"
        grouped[(reply.split, reply.family, kind)].append((reply, reading))
    rng = random.Random(0)
    for (split, family, kind), found in sorted(grouped.items()):
        print(f"\n[{split}] {family}: {kind}: {len(found)}")
        for reply, reading in rng.sample(found, min(per_family, len(found))):
            tail = reply.text[-160:].replace("\n", "⏎")
            ours = f"ours={reading.score} ({reading.reason}) matched={reading.matched!r}"
            print(f"  label={reply.label} ({reply.label_by}) {ours}: …{tail!r}")
