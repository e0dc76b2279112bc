"""Build and measure the fifth conformance corpus: judge replies from a repository no extractor round
of this project has read, held out until its first measurement (issue 30, second round).

HuihuiChyan/UnlimitedJudge (the study of judge generalisation behind "An Empirical Study of LLM-as-a-
Judge for LLM Evaluation: Fine-tuned Judge Model is not a General Substitute for GPT-4") committed the
replies of GPT-3.5-turbo-0613 and GPT-4-1106-preview, asked to rate one thing on 1-10 and end with
"Factuality Rating: [[N]]" (HaluEval QA, summaries and dialogue: is the text factual?) or "Safety
Rating: [[N]]" (ToxicChat: is the question safe?). The files were deleted from the repository later; the
snapshot keeps every version, and every version is read (a reply counted once per judge and text).

Run by hand, after the repository was fetched as a git snapshot (the `fetch` tool puts it under
/work/.mirror/<owner>+<name>/repo):

    PYTHONPATH=. python bench/fetch_unlimited_judge_corpus.py [--mirror DIR] [--out DIR]   # build
    PYTHONPATH=. python bench/fetch_unlimited_judge_corpus.py --measure [--out DIR]        # measure

--mirror defaults to $JUDGELOOP_MIRROR or /work/.mirror; --out to $JUDGELOOP_CONFORMANCE_FIFTH or
~/.cache/judgeloop/conformance/unlimited-judge. The data never goes into the repository.

The label is the authors' parser's output (evaluate_gpt_domain.py's parse_score_gpt: the number in the
last "Rating: [[N]]") where the reply holds "Rating: [["; elsewhere that parser returns 5.0 whatever the
reply says (its "found none"), so those replies were read by hand before the extractor read any of them
(bench/conformance_labels/unlimited_judge_unparsed.json, keyed by the sha256 of the reply; null: the reply
states no score, e.g. it was cut off before its verdict). The pairwise JudgeLM/PandaLM files (two scores
per reply) are not read: the extractor reads one score.

Two label corrections by rule, made after the first measurement showed them (bench/CONFORMANCE_SOURCES.md
gives the numbers before and after): "Rating: [[N/A]]" is a parse failure that the same parser also turns
into 5.0, so the reply states no score; "Rating: [[0]]" (the judge's "cannot be evaluated") is outside
the 1-10 scale the prompt asked for, so it is no score on that scale. Both are labelled `rule`: states none.
With --raw-labels the corpus is built with the source's labels as they are (the first measurement).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from bench.corpus_script import build_or_measure, cache_folder, hand_labels, text_hash
from bench.fetch_conformance_corpus import Reply, Snapshot, write_corpus

SNAPSHOT = "HuihuiChyan+UnlimitedJudge"
JUDGES = {"gpt-3.5-turbo-0613": "GPT-3.5-turbo-0613", "gpt-4-1106-preview": "GPT-4-1106-preview"}
TASKS = ("halu-eval-qa", "halu-eval-summary", "halu-eval-dialogue", "halu-eval", "toxic-chat")
SCALE = (1.0, 10.0, True)  # "a score that is an integer between 1 and 10"
HAND_LABELS = Path(__file__).resolve().parent / "conformance_labels" / "unlimited_judge_unparsed.json"


_LAST_RATING = re.compile(r"Rating: \[\[([^\]]*)\]\]")


def parsed_by_source(text: str) -> bool:
    """Whether the authors' parser read the reply, rather than returning its 5.0 for "found none"."""
    return "Rating: [[" in text


def states_none_by_rule(text: str, label: float) -> bool:
    """The parser's 5.0 from a failed float("N/A"), or a 0 outside the 1-10 scale: no score stated."""
    found = _LAST_RATING.findall(text)
    if not found:
        return False
    try:
        float(found[-1])
    except ValueError:
        return True
    return not SCALE[0] <= label <= SCALE[1]


def files() -> Iterator[tuple[str, str, str]]:
    for task in TASKS:
        for judge, family in JUDGES.items():
            yield f"{task}-{judge}-vanilla.jsonl", task, family


def source_label(text: str, score: float, raw: bool) -> tuple[float | None, str]:
    if raw or not states_none_by_rule(text, score):
        return score, "source"
    return None, "rule"


def replies(snapshot: Snapshot, labels: dict[str, float | None], raw: bool = False) -> Iterator[Reply]:
    for path, task, family in files():
        for blob in snapshot.versions(path):
            for line in snapshot.blob(blob).splitlines():
                if not line.strip():
                    continue
                row = json.loads(line)
                text = str(row["prediction"])
                parsed = parsed_by_source(text)
                label, label_by = source_label(text, float(row["score"]), raw) if parsed else (None, "source")
                if not parsed and text_hash(text) in labels:
                    label, label_by = labels[text_hash(text)], "hand"
                yield Reply(
                    family=f"{family} (UnlimitedJudge, 1-10)",
                    split="held_out",
                    source=f"{snapshot.name}:{path}",
                    group=task,
                    text=text,
                    label=label,
                    scale=SCALE,
                    label_by=label_by,
                )


def build(mirror: Path, out: Path, flags: frozenset[str]) -> None:
    snapshot = Snapshot(mirror, SNAPSHOT)
    labels = hand_labels(HAND_LABELS, missing_ok=True)
    write_corpus(out, replies(snapshot, labels, "--raw-labels" in flags), {snapshot.name: snapshot.head()})


def main(argv: list[str] | None = None) -> int:
    out = cache_folder("JUDGELOOP_CONFORMANCE_FIFTH", "unlimited-judge")
    return build_or_measure(argv, __doc__, out, build, "Corpus 5", flags=("--raw-labels",))


if __name__ == "__main__":
    sys.exit(main())
