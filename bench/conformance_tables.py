"""Per-family and per-reading-kind agreement of extract_score with each source's own score.

Used by bench/extractor_conformance.py for both corpora: ../shared/corpora/judge-replies (the one the
extractor was developed against) and the second corpus built by bench/fetch_conformance_corpus.py
(judge families not in the first; its "dev" part may be used to tune the grammar, its "held_out" part
never is).

precision  of the replies we read with this reason (and the source scored), the fraction equal to the source
recall     of the replies the source scored, the fraction we read with the same value
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
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


def second_corpus_path() -> Path | None:
    configured = os.environ.get("JUDGELOOP_CONFORMANCE")
    base = (
        Path(configured)
        if configured
        else Path(__file__).resolve().parents[1].parent / "shared-local" / "corpora" / "judge-replies-2"
    )
    path = base / "replies.jsonl"
    return path if path.is_file() else None


def second_corpus(path: Path) -> Iterator[LabelledReply]:
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
            )


@dataclass
class Agreement:
    replies: int = 0
    scored_by_source: int = 0
    read: int = 0
    read_and_scored: int = 0
    agree: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    agree_by_reason: Counter[str] = field(default_factory=Counter)
    scored_by_reason: Counter[str] = field(default_factory=Counter)

    def add(self, reply: LabelledReply, reading: ScoreReading) -> None:
        self.replies += 1
        self.reasons[reading.reason] += 1
        source_scored = reply.label is not None and reply.states_score
        self.scored_by_source += source_scored
        if reading.score is None:
            return
        self.read += 1
        if reply.label is None:
            return
        same = float(reading.score) == reply.label
        self.read_and_scored += 1
        self.scored_by_reason[reading.reason] += 1
        self.agree_by_reason[reading.reason] += same
        self.agree += same and source_scored

    @property
    def precision(self) -> float:
        agreeing = sum(self.agree_by_reason.values())
        return agreeing / self.read_and_scored if self.read_and_scored else float("nan")

    @property
    def recall(self) -> float:
        return self.agree / self.scored_by_source if self.scored_by_source else float("nan")


def read(reply: LabelledReply) -> ScoreReading:
    return extract_score(reply.text, reply.scale, labels=reply.labels)


def tally(
    replies: Iterable[LabelledReply],
) -> tuple[dict[tuple[str, str], Agreement], list[tuple[LabelledReply, ScoreReading]]]:
    by_family: dict[tuple[str, str], Agreement] = defaultdict(Agreement)
    disagreements: list[tuple[LabelledReply, ScoreReading]] = []
    for reply in replies:
        reading = read(reply)
        by_family[(reply.split, reply.family)].add(reply, reading)
        wrong = reading.score is not None and reply.label is not None and float(reading.score) != reply.label
        missed = reading.score is None and reply.label is not None and reply.states_score
        if wrong or missed:
            disagreements.append((reply, reading))
    return by_family, disagreements


def _ratio(numerator: int, denominator: int) -> str:
    return f"{numerator / denominator:.4f} ({numerator}/{denominator})" if denominator else "—"


HEADER = ("split", "family", "replies", "source", "read", "precision", "recall")


def _row(split: str, family: str, agreement: Agreement) -> str:
    precision = _ratio(sum(agreement.agree_by_reason.values()), agreement.read_and_scored)
    recall = _ratio(agreement.agree, agreement.scored_by_source)
    counts = f"{agreement.replies:>7} {agreement.scored_by_source:>7} {agreement.read:>7}"
    return f"{split:<15} {family:<52} {counts} {precision:>22} {recall:>22}"


def print_tables(title: str, by_family: dict[tuple[str, str], Agreement]) -> None:
    print(f"\n## {title}\n")
    split, family, *counts, precision, recall = HEADER
    print(
        f"{split:<15} {family:<52} " + " ".join(f"{c:>7}" for c in counts) + f" {precision:>22} {recall:>22}"
    )
    totals: dict[str, Agreement] = defaultdict(Agreement)
    for (split, family), agreement in sorted(by_family.items()):
        print(_row(split, family, agreement))
        total = totals[split]
        total.replies += agreement.replies
        total.scored_by_source += agreement.scored_by_source
        total.read += agreement.read
        total.read_and_scored += agreement.read_and_scored
        total.agree += agreement.agree
        total.reasons.update(agreement.reasons)
        total.agree_by_reason.update(agreement.agree_by_reason)
        total.scored_by_reason.update(agreement.scored_by_reason)
    for split, total in sorted(totals.items()):
        print(_row(split, "ALL", total))
    print("\nPer reading kind (precision: of the replies read with this reason that the source scored):")
    for split, total in sorted(totals.items()):
        kinds = ", ".join(
            f"{reason} {_ratio(total.agree_by_reason[reason], total.scored_by_reason[reason])}"
            for reason in sorted(total.scored_by_reason)
        )
        unread = ", ".join(f"{r}={n}" for r, n in total.reasons.most_common() if r not in READ_REASONS)
        print(f"  {split}: {kinds}\n  {split} not read: {unread}")


def print_disagreements(disagreements: list[tuple[LabelledReply, ScoreReading]], per_family: int = 4) -> None:
    grouped: dict[tuple[str, str, str], list[tuple[LabelledReply, ScoreReading]]] = defaultdict(list)
    for reply, reading in disagreements:
        kind = "we read a different value" if reading.score is not None else f"we abstain ({reading.reason})"
        grouped[(reply.split, reply.family, kind)].append((reply, reading))
    rng = random.Random(0)
    for (split, family, kind), found in sorted(grouped.items()):
        print(f"\n[{split}] {family}: {kind}: {len(found)}")
        for reply, reading in rng.sample(found, min(per_family, len(found))):
            tail = reply.text[-160:].replace("\n", "⏎")
            ours = f"ours={reading.score} ({reading.reason}) matched={reading.matched!r}"
            print(f"  source={reply.label} {ours}: …{tail!r}")
