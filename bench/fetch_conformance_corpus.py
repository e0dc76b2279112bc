"""Build the second conformance corpus: real judge replies from judge families that are not in
../shared/corpora/judge-replies, each with the score its source's own parser or label gives.

Run by hand, after the public repositories named in bench/CONFORMANCE_SOURCES.md were fetched as git
snapshots (the `fetch` tool puts them under /work/.mirror/<owner>+<name>/repo):

    PYTHONPATH=. python bench/fetch_conformance_corpus.py [--mirror DIR] [--out DIR]

--mirror defaults to $JUDGELOOP_MIRROR or /work/.mirror; --out to $JUDGELOOP_CONFORMANCE or
../shared-local/corpora/judge-replies-2 beside the checkout. The data never goes into the repository.

Every version of a file that the snapshot holds is read (FastChat appends judgments, and the newest
version of some files is too large for the snapshot while older ones are there); a reply is kept once
per (source file, item, judge, text).

One JSON line per reply: family, split ("dev": the grammar may be tuned on it; "held_out": never),
source, group, text, label (the source's score, null when its parser found none), scale
{min, max, integer}, labels (extra label words), states_score (false where the source removed the score
from the text, so only precision can be measured there).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Reply:
    family: str
    split: str
    source: str
    group: str
    text: str
    label: float | None
    scale: tuple[float, float, bool]
    states_score: bool = True
    label_by: str = "source"  # "hand": the source's parser found none, the score was read by hand

    def as_json(self) -> dict[str, Any]:
        low, high, integer = self.scale
        return {
            "family": self.family,
            "split": self.split,
            "source": self.source,
            "group": self.group,
            "text": self.text,
            "label": self.label,
            "scale": {"min": low, "max": high, "integer": integer},
            "labels": [],
            "states_score": self.states_score,
            "label_by": self.label_by,
        }


class Snapshot:
    """A fetched bare git snapshot, read with git (no work tree)."""

    def __init__(self, mirror: Path, name: str) -> None:
        self.name = name
        self.git_dir = mirror / name / "repo"
        if not self.git_dir.is_dir():
            raise SystemExit(f"{self.git_dir} not found: fetch github:{name.replace('+', '/')} first")

    def _git(self, *args: str) -> str:
        return subprocess.run(
            ["git", "--git-dir", str(self.git_dir), *args], check=True, capture_output=True, text=True
        ).stdout

    def head(self) -> str:
        return self._git("rev-parse", "HEAD").strip()

    def versions(self, path: str) -> list[str]:
        """Blob ids of every version of ``path`` that the snapshot holds, oldest first."""
        blobs: list[str] = []
        for commit in reversed(self._git("rev-list", "--all", "--", path).split()):
            listing = self._git("ls-tree", commit, "--", path).split()
            if len(listing) >= 3 and listing[2] not in blobs and self._has(listing[2]):
                blobs.append(listing[2])
        return blobs

    def paths(self, prefix: str, suffix: str) -> list[str]:
        seen: set[str] = set()
        for commit in self._git("rev-list", "--all").split():
            for path in self._git("ls-tree", "-r", "--name-only", commit, "--", prefix).split("\n"):
                if path.endswith(suffix):
                    seen.add(path)
        return sorted(seen)

    def _has(self, blob: str) -> bool:
        probe = subprocess.run(
            ["git", "--git-dir", str(self.git_dir), "cat-file", "-e", blob], capture_output=True, check=False
        )
        return probe.returncode == 0

    def blob(self, blob: str) -> str:
        return self._git("cat-file", "-p", blob)


def _lines(text: str) -> Iterator[dict[str, Any]]:
    for line in text.splitlines():
        if line.strip():
            yield json.loads(line)


# FastChat's MT-Bench single grading: 1-10, "Rating: [[N]]", 8.5 allowed; `score` is FastChat's parse
# (-1: it found none).
MT_BENCH = (1.0, 10.0, False)
FASTCHAT_JUDGES = {
    # judge name in the file -> (family, split)
    "gpt-4o": ("gpt-4o (MT-Bench, 9 languages)", "dev"),
    "gpt-4-turbo": ("gpt-4-turbo (MT-Bench, 6 languages)", "held_out"),
    "gpt-4.1-2025-04-14": ("gpt-4.1 (Japanese MT-Bench)", "held_out"),
    "gpt-4.1-mini-2025-04-14": ("gpt-4.1-mini (Japanese MT-Bench)", "held_out"),
}


def fastchat_replies(snapshot: Snapshot) -> Iterator[Reply]:
    seen: set[tuple[Any, ...]] = set()
    for path in snapshot.paths("fastchat/llm_judge/data", "_single.jsonl"):
        if "/model_judgment/" not in path:
            continue
        bench = path.split("/")[3]
        for blob in snapshot.versions(path):
            for row in _lines(snapshot.blob(blob)):
                judge, prompt = row["judge"]
                if judge not in FASTCHAT_JUDGES:
                    continue
                key = (judge, bench, row["question_id"], row["model"], row.get("turn"), row["judgment"])
                if key in seen:
                    continue
                seen.add(key)
                family, split = FASTCHAT_JUDGES[judge]
                score = float(row["score"])
                yield Reply(
                    family=family,
                    split=split,
                    source=f"{snapshot.name}:{path}",
                    group=f"{bench} {prompt}",
                    text=str(row["judgment"]),
                    label=None if score == -1 else score,
                    scale=MT_BENCH,
                )


def autoj_rating(text: str) -> float | None:
    """Auto-J's own parser (codes/usage/example.py extract_single_rating): the last "Rating: [[x]]"."""
    pos = text.rfind("Rating: [[")
    if pos == -1:
        return None
    end = text.find("]]", pos)
    try:
        return float(text[pos + len("Rating: [[") : end].strip())
    except ValueError:
        return None


AUTOJ_SCALE = (1.0, 10.0, False)  # "on a scale of 1 to 10"; the GPT-4 training labels include 6.5


def autoj_replies(snapshot: Snapshot) -> Iterator[Reply]:
    source = f"{snapshot.name}:data/training/single_traindata.jsonl"
    for blob in snapshot.versions("data/training/single_traindata.jsonl"):
        for row in _lines(snapshot.blob(blob)):
            yield Reply(
                family="gpt-4 critiques (Auto-J training data)",
                split="dev",
                source=source,
                group=str(row.get("scenario")),
                text=str(row["target_output"]),
                label=float(row["pred_score"]),
                scale=AUTOJ_SCALE,
            )
    for path, family in (
        ("data/outputs/critique_example_output.jsonl", "auto-j-13b (Auto-J test critiques)"),
        ("data/test/reference_chatgpt_critique.jsonl", "gpt-3.5 critiques (Auto-J test reference)"),
    ):
        for blob in snapshot.versions(path):
            for row in _lines(snapshot.blob(blob)):
                text = str(row["output"])
                yield Reply(
                    family=family,
                    split="held_out",
                    source=f"{snapshot.name}:{path}",
                    group="single",
                    text=text,
                    label=autoj_rating(text),
                    scale=AUTOJ_SCALE,
                )


def prometheus_replies(snapshot: Snapshot) -> Iterator[Reply]:
    """GPT-4's Prometheus-style feedback with the "[RESULT] N" cut off and kept as ``gpt4_score``: the
    text rarely states the score, so these rows measure precision (never read a wrong score), not recall."""
    for path in (
        "evaluation/benchmark/data/vicuna_eval.json",
        "evaluation/benchmark/data/mt_bench_eval.json",
    ):
        for blob in snapshot.versions(path):
            for row in _lines(snapshot.blob(blob)):
                for feedback, score in zip(
                    row.get("gpt4_feedback", ()), row.get("gpt4_score", ()), strict=True
                ):
                    yield Reply(
                        family="gpt-4 feedback, score removed (Prometheus eval sets)",
                        # Looked at while developing ("of score 5" read as a verb): not held out.
                        split="dev",
                        source=f"{snapshot.name}:{path}",
                        group=path.rsplit("/", 1)[-1].removesuffix(".json"),
                        text=str(feedback),
                        label=float(score),
                        scale=(1.0, 5.0, True),
                        states_score=False,
                    )


SOURCES = (
    ("jpacifico+multilingual_mt_bench", fastchat_replies),
    ("shisa-ai+ja-mt-bench-harness", fastchat_replies),
    ("GAIR-NLP+auto-j", autoj_replies),
    ("prometheus-eval+prometheus", prometheus_replies),
)


def default_out() -> Path:
    configured = os.environ.get("JUDGELOOP_CONFORMANCE")
    return (
        Path(configured) if configured else REPO_ROOT.parent / "shared-local" / "corpora" / "judge-replies-2"
    )


def locations(argv: list[str] | None, description: str, out: Path) -> tuple[Path, Path]:
    """--mirror (where the snapshots are) and --out (a folder outside the repository, created)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--mirror", type=Path, default=Path(os.environ.get("JUDGELOOP_MIRROR", "/work/.mirror"))
    )
    parser.add_argument("--out", type=Path, default=out)
    args = parser.parse_args(argv)
    resolved: Path = args.out.resolve()
    if REPO_ROOT in (resolved, *resolved.parents):
        raise SystemExit(f"{resolved} is inside the repository: the corpus must stay outside it")
    resolved.mkdir(parents=True, exist_ok=True)
    return args.mirror, resolved


def write_corpus(out: Path, replies: Iterable[Reply], heads: dict[str, str]) -> None:
    """replies.jsonl, one line per family and text (the same reply in two forks, or judged twice, is
    counted once), SNAPSHOTS.json, and the counts printed."""
    seen_texts: set[tuple[str, str]] = set()
    counts: dict[tuple[str, str], int] = {}
    with (out / "replies.jsonl").open("w", encoding="utf-8") as handle:
        for reply in replies:
            if (reply.family, reply.text) in seen_texts:
                continue
            seen_texts.add((reply.family, reply.text))
            handle.write(json.dumps(reply.as_json(), ensure_ascii=False, sort_keys=True) + "\n")
            key = (reply.family, reply.label_by)
            counts[key] = counts.get(key, 0) + 1
    (out / "SNAPSHOTS.json").write_text(json.dumps(heads, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    for (family, label_by), n in sorted(counts.items()):
        print(f"{n:>6}  {family}, label by {label_by}")
    print(f"{sum(counts.values()):>6}  replies -> {out / 'replies.jsonl'}")


def main(argv: list[str] | None = None) -> int:
    mirror, out = locations(argv, __doc__.split("\n\n")[0], default_out())
    snapshots = [(Snapshot(mirror, name), read) for name, read in SOURCES]
    # shisa-ai forked jpacifico's harness: their common replies are written once.
    replies = (reply for snapshot, read in snapshots for reply in read(snapshot))
    write_corpus(out, replies, {snapshot.name: snapshot.head() for snapshot, _ in snapshots})
    return 0


if __name__ == "__main__":
    sys.exit(main())
