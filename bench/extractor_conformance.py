"""How pipeline.judges.scores.extract_score agrees with the authors' own parsers on real judge replies.

Run by hand (about 15 s; reads every row, the 200k-row gzip included):

    PYTHONPATH=. python bench/extractor_conformance.py

The corpora live outside the repository (never copied in, never committed): ../shared/corpora/
judge-replies next to the checkout, or $JUDGELOOP_SHARED/corpora/judge-replies (corpus 1, which the
extractor was developed against); and the second corpus built by bench/fetch_conformance_corpus.py
(../shared-local/corpora/judge-replies-2 or $JUDGELOOP_CONFORMANCE; judge families not in corpus 1,
split into dev and held out, see bench/CONFORMANCE_SOURCES.md); and the third, an open chat-tuned
judge that writes its verdicts as sentences, built by bench/fetch_open_judge_corpus.py
(~/.cache/judgeloop/conformance/open-judges or $JUDGELOOP_CONFORMANCE_OPEN). Each gets a table per
family and per reading kind (bench/conformance_tables.py).

precision  of the scores we return on rows the authors parsed, the fraction equal to theirs
recall     of the rows the authors parsed, the fraction we read with the same value
coverage   of all rows, the fraction we read at all

The authors' parsers are the reference, not the truth: Chiang & Lee's parse_output() takes the first
digit after the last "rating:" (or anywhere), FastChat's takes the first [[N]] (or [N]). Where we
abstain or disagree the examples below say why; being more conservative is by design.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.conformance_tables import (
    LabelledReply,
    by_label_origin,
    labelled_replies,
    print_disagreements,
    print_tables,
    second_corpus_path,
    third_corpus_path,
)
from bench.conformance_tables import tally as tally_families
from pipeline.judges.scores import READ_REASONS, Scale, ScoreReading, extract_score

CLOSER_LOOK_SCALES = {
    "coherence": Scale(1, 3),
    "engagingness": Scale(1, 3),
    "naturalness": Scale(1, 3),
    "groundedness": Scale(0, 1),
}
# FastChat allows 8.5 and 9.5; a 1-10 scale with non-integers reads them as GPT-4 wrote them.
MT_BENCH_SCALE = Scale(1, 10, integer=False)
EXAMPLES_PER_KIND = 5


@dataclass(frozen=True)
class Row:
    corpus: str
    group: str  # prompt mode (closer look) or judge prompt (MT-Bench)
    text: str
    authors: float | None  # None: the authors' parser found nothing (FastChat's -1 included)
    scale: Scale
    labels: tuple[str, ...]


def corpora_dir() -> Path | None:
    shared = os.environ.get("JUDGELOOP_SHARED")
    base = Path(shared) if shared else Path(__file__).resolve().parents[1].parent / "shared"
    path = base / "corpora" / "judge-replies"
    return path if path.is_dir() else None


def _jsonl(path: Path) -> Iterator[dict[str, object]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            yield json.loads(line)


def closer_look_rows(path: Path, corpus: str) -> Iterator[Row]:
    for record in _jsonl(path):
        dimension = str(record["dimension"])
        authors = record["authors_parse_output"]
        yield Row(
            corpus=corpus,
            group=str(record["prompt_mode"]),
            text=str(record["response"]),
            authors=None if authors is None else float(str(authors)),
            scale=CLOSER_LOOK_SCALES[dimension],
            # The G-Eval style prompts end with "- Coherence:", so the dimension is the label.
            labels=(dimension,),
        )


def mt_bench_rows(path: Path, corpus: str) -> Iterator[Row]:
    for record in _jsonl(path):
        score = float(str(record["score"]))
        judge = record["judge"]
        yield Row(
            corpus=corpus,
            group=str(judge[1]) if isinstance(judge, list) else str(judge),
            text=str(record["judgment"]),
            authors=None if score == -1 else score,
            scale=MT_BENCH_SCALE,
            labels=(),
        )


def all_rows(root: Path, *, full: bool = True) -> Iterator[Row]:
    closer = root / "closer_look_llm_eval"
    if full:
        yield from closer_look_rows(
            closer / "topical_chat_gpt35_judge_responses.jsonl.gz", "closer_look (200k)"
        )
    else:
        yield from closer_look_rows(closer / "sample_first_response_per_item.jsonl", "closer_look sample")
    yield from closer_look_rows(closer / "edge_cases_nonstandard_format.jsonl", "closer_look edge")
    for name in ("gpt-4_single-origin.jsonl", "gpt-4_single.jsonl"):
        yield from mt_bench_rows(root / "dreaming_panda_mtbench" / name, f"dreaming_panda {name}")
    yield from mt_bench_rows(root / "medusa_mtbench_judgments" / "gpt-4_single.jsonl", "medusa gpt-4_single")


def read(row: Row) -> ScoreReading:
    return extract_score(row.text, row.scale, labels=row.labels)


_LEADING_NUMBER = re.compile(r"^\W*[0-9]+(?:\.[0-9]+)?\s*[-.,:)]\s*\S")
_LIST_NUMBER_BEFORE_LABEL = re.compile(r"^\s*[0-9]+\.\s*[A-Za-z]+\s*:\s*[0-9]")
_OTHER_LABEL = re.compile(r"^[-*\s]*[A-Za-z][A-Za-z ]{0,30}[0-9]?\s*:\s*\n?\s*[0-9]", re.MULTILINE)


def disagreement(row: Row, reading: ScoreReading) -> str | None:
    """The kind of disagreement with the authors' parse, or None when we agree."""
    ours = reading.score
    if row.authors is None:
        return None if ours is None else "we read, the authors' parser did not"
    if ours is not None:
        if float(ours) == row.authors:
            return None
        if _LIST_NUMBER_BEFORE_LABEL.match(row.text):
            return "different value: list number before the label ('1. Engagingness: 2'; authors take the 1)"
        return "different value: authors' first digit is in the prose (facts, dates, '2002')"
    if reading.reason == "no_score":
        if _LEADING_NUMBER.match(row.text):
            return "we abstain: leading number then prose or a list ('2. The response is...', '2 - somewhat')"
        if _OTHER_LABEL.search(row.text):
            return "we abstain: a label we were not given ('Response: 2', 'Interestingness: 3')"
        return "we abstain: a number only inside prose (authors take the first digit anywhere)"
    return {
        "non_integer": "we abstain: decimal on an integer scale (authors truncate 0.5 to 0)",
        "out_of_range": "we abstain: off the scale (authors keep 3 on a 0-1 scale)",
        "ambiguous": "we abstain: a range or a choice",
    }.get(reading.reason, f"we abstain: {reading.reason}")


@dataclass
class Tally:
    rows: int = 0
    authors_parsed: int = 0
    ours_read: int = 0
    both_read: int = 0
    agree: int = 0

    def add(self, row: Row, reading: ScoreReading) -> None:
        self.rows += 1
        self.authors_parsed += row.authors is not None
        self.ours_read += reading.score is not None
        if row.authors is not None and reading.score is not None:
            self.both_read += 1
            self.agree += float(reading.score) == row.authors

    @property
    def precision(self) -> float:
        return self.agree / self.both_read if self.both_read else float("nan")

    @property
    def recall(self) -> float:
        return self.agree / self.authors_parsed if self.authors_parsed else float("nan")

    @property
    def coverage(self) -> float:
        return self.ours_read / self.rows if self.rows else float("nan")


def tally(
    rows: Iterator[Row],
) -> tuple[dict[str, Tally], dict[tuple[str, str], Tally], dict[str, Counter[str]]]:
    per_corpus: dict[str, Tally] = defaultdict(Tally)
    per_group: dict[tuple[str, str], Tally] = defaultdict(Tally)
    reasons: dict[str, Counter[str]] = defaultdict(Counter)
    for row in rows:
        reading = read(row)
        per_corpus[row.corpus].add(row, reading)
        per_group[(row.corpus, row.group)].add(row, reading)
        reasons[row.corpus][reading.reason] += 1
    return per_corpus, per_group, reasons


def _line(name: str, t: Tally) -> str:
    return (
        f"{name:<44} {t.rows:>7} {t.authors_parsed:>7} {t.ours_read:>7} "
        f"{t.precision:>9.4f} {t.recall:>7.4f} {t.coverage:>8.4f}"
    )


def _snippet(text: str, matched: str | None, width: int = 150) -> str:
    # Around what we read, else around the first digit (where the authors' parser usually looked).
    digit = re.search(r"[0-9]", text)
    at = text.rfind(matched) if matched else (digit.start() if digit else -1)
    start = max(0, (at if at >= 0 else len(text)) - width // 2)
    piece = text[start : start + width]
    return ("…" if start else "") + piece.replace("\n", "⏎") + ("…" if start + width < len(text) else "")


def print_summary(rows: list[Row]) -> None:
    """Corpus 1 per corpus and group, the reasons read, and a Score:-only configuration."""
    per_corpus, per_group, reasons = tally(iter(rows))
    columns = ("rows", "authors", "ours", "precision", "recall", "coverage")
    widths = (7, 7, 7, 9, 7, 8)
    header = f"{'corpus / group':<44} " + " ".join(f"{c:>{w}}" for c, w in zip(columns, widths, strict=True))
    print(header)
    print("-" * len(header))
    for corpus, t in per_corpus.items():
        print(_line(corpus, t))
        for (c, group), g in sorted(per_group.items()):
            if c == corpus:
                print(_line(f"  {group}", g))
    print()
    for corpus, counter in reasons.items():
        read_n = sum(n for r, n in counter.items() if r in READ_REASONS)
        print(f"{corpus}: read {read_n}: " + ", ".join(f"{r}={n}" for r, n in counter.most_common()))

    # The same corpora with only the default labels: what a Score:-only configuration would read.
    plain = Tally()
    for row in rows:
        if row.corpus.startswith("closer_look (200k)"):
            plain.add(row, extract_score(row.text, row.scale))
    print()
    print(_line("closer_look (200k), default labels only", plain))


def print_first_disagreements(rows: list[Row]) -> None:
    """Corpus 1's disagreements with the authors' parse, a few random examples of each kind."""
    print(
        "\nDisagreements with the authors' parse, by kind (the 200k closer-look rows and all MT-Bench rows;"
    )
    print(f"up to {EXAMPLES_PER_KIND} random examples of each, seed 0):")
    kinds: dict[tuple[str, str], list[tuple[Row, ScoreReading]]] = defaultdict(list)
    for row in rows:
        if row.corpus == "closer_look edge":
            continue  # a subset of the 200k rows
        reading = read(row)
        kind = disagreement(row, reading)
        if kind is not None:
            kinds[(row.corpus.split()[0], kind)].append((row, reading))
    rng = random.Random(0)
    for (family, kind), found in sorted(kinds.items()):
        print(f"\n[{family}] {kind}: {len(found)} rows")
        for row, reading in rng.sample(found, min(EXAMPLES_PER_KIND, len(found))):
            print(
                f"  authors={row.authors} ours={reading.score} ({reading.reason}) {row.group}: "
                f"{_snippet(row.text, reading.matched)!r}"
            )
    if not any(family != "closer_look" for family, _ in kinds):
        print("\n[MT-Bench] no disagreements")


def second_corpus() -> None:
    """Corpus 2 (bench/fetch_conformance_corpus.py), by family and reading kind."""
    second = second_corpus_path()
    if second is None:
        print(
            "\nsecond corpus not found: run bench/fetch_conformance_corpus.py (or set JUDGELOOP_CONFORMANCE)"
        )
        return
    by_family, disagreements = tally_families(labelled_replies(second))
    print_tables(f"Corpus 2 ({second}), by family and reading kind", by_family)
    print(
        "\nCorpus 2 disagreements with the source's score, by family (up to 4 random examples each, seed 0):"
    )
    print_disagreements(disagreements)


def main() -> int:
    root = corpora_dir()
    if root is None:
        print("judge-reply corpora not found: set JUDGELOOP_SHARED or put shared/ next to the checkout")
        return 2
    rows = list(all_rows(root))
    print_summary(rows)
    print_first_disagreements(rows)
    first = (
        LabelledReply(row.corpus.split()[0], "dev (corpus 1)", row.text, row.authors, row.scale, row.labels)
        for row in rows
        if row.corpus != "closer_look edge"  # a subset of the 200k rows
    )
    print_tables(
        "Corpus 1 (../shared/corpora/judge-replies), by family and reading kind", tally_families(first)[0]
    )
    second_corpus()
    third_corpus()
    return 0


def third_corpus() -> None:
    """An open chat-tuned judge writing verdicts as sentences (bench/fetch_open_judge_corpus.py)."""
    third = third_corpus_path()
    if third is None:
        print(
            "\nthird corpus not found: run bench/fetch_open_judge_corpus.py"
            " (or set JUDGELOOP_CONFORMANCE_OPEN)"
        )
        return
    replies = list(labelled_replies(third))
    by_family, disagreements = tally_families(replies)
    print_tables(f"Corpus 3 ({third}), by family and reading kind", by_family)
    print_tables("Corpus 3, by the origin of the label", tally_families(replies, by_label_origin)[0])
    print("\nCorpus 3 disagreements, by family (up to 4 random examples each, seed 0):")
    print_disagreements(disagreements)


if __name__ == "__main__":
    sys.exit(main())
