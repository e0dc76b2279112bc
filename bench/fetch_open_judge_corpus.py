"""Build the third conformance corpus: a chat-tuned open judge's replies, in full sentences.

Vicuna-13B (and, with the same prompt, GPT-3.5-turbo-0613 and GPT-4-1106-preview) grading single
answers 1-10 with FastChat's MT-Bench prompt ("... rate the response on a scale of 1 to 10 by
strictly following this format: "[[rating]]""), published with the score their own parser read
(`pred_score`) by HuihuiChyan/UnifiedBias (bench/CONFORMANCE_SOURCES.md). Vicuna ignores the format
in one reply of six and writes its verdict as a sentence ("Overall, I would rate the AI assistant's
response as an 8 out of 10"): the misses of issue 23.

Run by hand, after the repository was fetched as a git snapshot (the `fetch` tool puts it under
/work/.mirror/<owner>+<name>/repo):

    PYTHONPATH=. python bench/fetch_open_judge_corpus.py [--mirror DIR] [--out DIR]

--mirror defaults to $JUDGELOOP_MIRROR or /work/.mirror; --out to $JUDGELOOP_CONFORMANCE_OPEN or
~/.cache/judgeloop/conformance/open-judges. The data never goes into the repository.

The label is the source's own parser's output, stored beside each reply: the last "[[x]]", else the
first digit after "Rating:", else 5.1, its sentinel for "found none" (read here as no label). Where
its parser found none, the label is ours, read by hand from the reply
(bench/conformance_labels/unifiedbias_unparsed.json, keyed by the sha256 of the reply; `label_by:
hand`).
Vicuna's replies are split by the first hex digit of that hash: 0-3 "dev" (the grammar may be tuned
on them), 4-f "held_out"; the GPT replies are all held out. The files were removed from the
repository's newest commit; the last version before that is read (the snapshot keeps history).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.corpus_script import cache_folder, hand_labels, text_hash
from bench.fetch_conformance_corpus import Reply, Snapshot, locations, write_corpus

SNAPSHOT = "HuihuiChyan+UnifiedBias"
HAND_LABELS = Path(__file__).resolve().parent / "conformance_labels" / "unifiedbias_unparsed.json"
FOUND_NONE = 5.1  # UnifiedBias's parser: no "[[x]]" and no "Rating: N"
SCALE = (1.0, 10.0, False)  # FastChat's single grading; "8.5" occurs
FILES = {
    # path -> (family, held out whole?)
    "output_data/position-vicuna-13b-pointwise.jsonl": ("vicuna-13b (UnifiedBias, MT-Bench prompt)", False),
    "output_data/position-gpt-3.5-turbo-0613-pointwise.jsonl": ("gpt-3.5-turbo-0613 (UnifiedBias)", True),
    "output_data/position-gpt-4-1106-preview-pointwise.jsonl": ("gpt-4-1106-preview (UnifiedBias)", True),
}


def split_of(text: str, held_out_whole: bool) -> str:
    return "held_out" if held_out_whole or text_hash(text)[0] not in "0123" else "dev"


def unifiedbias_replies(snapshot: Snapshot, labels: dict[str, float | None]) -> Iterator[Reply]:
    for path, (family, held_out_whole) in FILES.items():
        versions = snapshot.versions(path)
        if not versions:
            raise SystemExit(f"{snapshot.name}: no version of {path} in the snapshot")
        for line in snapshot.blob(versions[-1]).splitlines():
            if not line.strip():
                continue
            row: dict[str, Any] = json.loads(line)
            text = str(row["prediction"])
            score = float(row["pred_score"])
            label: float | None = None if score == FOUND_NONE else score
            label_by = "source"
            if label is None and text_hash(text) in labels:
                label, label_by = labels[text_hash(text)], "hand"
            yield Reply(
                family=family,
                split=split_of(text, held_out_whole),
                source=f"{snapshot.name}:{path}",
                group="pointwise",
                text=text,
                label=label,
                scale=SCALE,
                label_by=label_by,
            )


def main(argv: list[str] | None = None) -> int:
    mirror, out = locations(
        argv, __doc__.split("\n\n")[0], cache_folder("JUDGELOOP_CONFORMANCE_OPEN", "open-judges")
    )
    snapshot = Snapshot(mirror, SNAPSHOT)
    # The judge ran greedily on answers that repeat: each text is written once per family.
    write_corpus(out, unifiedbias_replies(snapshot, hand_labels(HAND_LABELS)), {SNAPSHOT: snapshot.head()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
