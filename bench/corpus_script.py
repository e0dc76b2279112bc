"""What the scripts that build a held-out conformance corpus share: the hand labels keyed by the
reply's sha256, the default folder under ~/.cache, and a command line that either builds the corpus
from a mirrored snapshot or (--measure) prints the extractor's agreement with it."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from bench.conformance_tables import (
    by_label_origin,
    labelled_replies,
    print_disagreements,
    print_tables,
    tally,
)
from bench.fetch_conformance_corpus import locations

# build(mirror, out, flags): writes the corpus from the snapshots under `mirror` into `out`; `flags`
# holds the script's own switches that were given.
Build = Callable[[Path, Path, frozenset[str]], None]


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def hand_labels(path: Path, missing_ok: bool = False) -> dict[str, float | None]:
    """The labels read by hand, by the sha256 of the reply (None: the reply states no score)."""
    if missing_ok and not path.is_file():
        return {}
    labels = json.loads(path.read_text(encoding="utf-8"))["labels"]
    return {str(key): None if value is None else float(value) for key, value in labels.items()}


def cache_folder(variable: str, name: str) -> Path:
    """$variable, else ~/.cache/judgeloop/conformance/<name>: outside the repository."""
    configured = os.environ.get(variable)
    return Path(configured) if configured else Path.home() / ".cache" / "judgeloop" / "conformance" / name


def measure(out: Path, corpus_name: str, qualifier: str = "") -> int:
    corpus = out / "replies.jsonl"
    if not corpus.is_file():
        print(f"{corpus} not found: build it first (without --measure)")
        return 2
    replies = list(labelled_replies(corpus))
    by_family, disagreements = tally(replies)
    print_tables(f"{corpus_name}{qualifier} ({corpus}), by family and reading kind", by_family)
    print_tables(f"{corpus_name}, by the origin of the label", tally(replies, by_label_origin)[0])
    print(f"\n{corpus_name} disagreements (up to 4 random examples each, seed 0):")
    print_disagreements(disagreements)
    return 0


def build_or_measure(
    argv: list[str] | None,
    doc: str,
    default_out: Path,
    build: Build,
    corpus_name: str,
    qualifier: str = "",
    flags: tuple[str, ...] = (),
) -> int:
    """The script's command line: [--mirror DIR] [--out DIR] [flags], or --measure [--out DIR]."""
    args = list(sys.argv[1:] if argv is None else argv)
    description = doc.split("\n\n")[0]
    if "--measure" in args:
        args.remove("--measure")
        _, out = locations(args, description, default_out)
        return measure(out, corpus_name, qualifier)
    given = frozenset(flag for flag in flags if flag in args)
    args = [arg for arg in args if arg not in given]
    mirror, out = locations(args, description, default_out)
    build(mirror, out, given)
    return 0
