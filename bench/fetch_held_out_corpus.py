"""Build and measure the fourth conformance corpus, held out from every extractor round so far.

An open judge writing free prose: MT-Bench single grading (FastChat's prompt, 1-10) by the model
InstructLab's eval served in June 2024 under FastChat's "gpt-4" judge name, as committed by
instructlab/eval (data/mt_bench/model_judgment/gpt-4_single.jsonl). The judge ignores the "[[rating]]"
format in two replies of three and writes its verdict as a sentence ("The rating for this conversation
is 8.", "The assistant's response rate is 10/10.", "I rate the response as 1 because ...") or no
verdict at all (bench/CONFORMANCE_SOURCES.md).

Run by hand, after the repository was fetched as a git snapshot (the `fetch` tool puts it under
/work/.mirror/<owner>+<name>/repo):

    PYTHONPATH=. python bench/fetch_held_out_corpus.py [--mirror DIR] [--out DIR]   # build
    PYTHONPATH=. python bench/fetch_held_out_corpus.py --measure [--out DIR]        # measure

--mirror defaults to $JUDGELOOP_MIRROR or /work/.mirror; --out to $JUDGELOOP_CONFORMANCE_HELD_OUT or
~/.cache/judgeloop/conformance/held-out. The data never goes into the repository.

The label is FastChat's own parser's `score` where it found one; where it found none (-1), or misread
code as a rating ("array[0]" read as 0), the label was read by hand before the extractor read any of
these replies (bench/conformance_labels/instructlab_eval_unparsed.json, keyed by the sha256 of the
reply; null: the reply states no single score of its own). Every reply is held out.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.corpus_script import build_or_measure, cache_folder, hand_labels, text_hash
from bench.fetch_conformance_corpus import Reply, Snapshot, write_corpus

SNAPSHOT = "instructlab+eval"
PATH = "data/mt_bench/model_judgment/gpt-4_single.jsonl"
FAMILY = "open judge served by InstructLab eval as 'gpt-4' (MT-Bench single, 2024)"
HAND_LABELS = Path(__file__).resolve().parent / "conformance_labels" / "instructlab_eval_unparsed.json"
SCALE = (1.0, 10.0, False)  # FastChat's single grading


def instructlab_replies(snapshot: Snapshot, labels: dict[str, float | None]) -> Iterator[Reply]:
    versions = snapshot.versions(PATH)
    if not versions:
        raise SystemExit(f"{snapshot.name}: no version of {PATH} in the snapshot")
    for line in snapshot.blob(versions[-1]).splitlines():
        if not line.strip():
            continue
        row: dict[str, Any] = json.loads(line)
        text = str(row["judgment"])
        score = float(row["score"])
        label: float | None = None if score == -1 else score
        label_by = "source"
        if text_hash(text) in labels:
            label, label_by = labels[text_hash(text)], "hand"
        judge = row["judge"]
        yield Reply(
            family=FAMILY,
            split="held_out",
            source=f"{snapshot.name}:{PATH}",
            group=str(judge[1]) if isinstance(judge, list) else str(judge),
            text=text,
            label=label,
            scale=SCALE,
            label_by=label_by,
        )


def build(mirror: Path, out: Path, flags: frozenset[str]) -> None:
    snapshot = Snapshot(mirror, SNAPSHOT)
    write_corpus(
        out, instructlab_replies(snapshot, hand_labels(HAND_LABELS)), {snapshot.name: snapshot.head()}
    )


def main(argv: list[str] | None = None) -> int:
    out = cache_folder("JUDGELOOP_CONFORMANCE_HELD_OUT", "held-out")
    return build_or_measure(argv, __doc__, out, build, "Corpus 4", ", held out")


if __name__ == "__main__":
    sys.exit(main())
