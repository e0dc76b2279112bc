"""A stage run's statistics (RunStats, kept by its session) and its summary
(.judgeloop/runs/STAGE.json), written as it is encoded (issue 33).

The summary names every key the run served, sorted. Built whole (a sorted copy of the keys, then
one string, through json's pure-Python encoder, which an indented dump uses and which holds every
piece until it joins them), it cost about 400 bytes a key at the stage's close, when the stage
holds the most: about 200 MB for the paper's judge at a million calls. The keys are now sorted as
names only (8 bytes a key) and the text goes to the file in pieces of a few thousand lines: the
same bytes as json.dumps(summary, indent=1) + "\\n".
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.errors import ReplayMissError
from pipeline.llm.files import atomic_write_chunks
from pipeline.llm.key_table import KeyTable

PIECES = 4096  # the encoder's pieces joined into one write


@dataclass
class RunStats:
    hits: int = 0
    model_calls: int = 0
    misses: list[ReplayMissError] = field(default_factory=list)
    keys: KeyTable = field(default_factory=KeyTable)  # key -> "hit" | "miss" (packed: issue 33)
    empty_replies: int = 0  # replies that were empty or only whitespace: failed, never stored
    unreadable_replies: int = 0  # replies holding a lone surrogate: failed, never stored


def stats_summary(stage: str, mode: str, stats: RunStats) -> dict[str, Any]:
    """The summary of a stage's run, but its keys (`write_summary` writes `stats.keys` in their place)."""
    summary: dict[str, Any] = {
        "stage": stage,
        "mode": mode,
        "hits": stats.hits,
        "model_calls": stats.model_calls,
        "replay_misses": len(stats.misses),
        "keys": None,  # its place: every key served, sorted as it is written
    }
    if stats.empty_replies:  # absent when none: a summary reads as it always did
        summary["empty_replies"] = stats.empty_replies
    if stats.unreadable_replies:
        summary["unreadable_replies"] = stats.unreadable_replies
    return summary


class _SortedKeys(dict[str, Any]):
    """`keys` as json's encoder reads a dict (its length, then its items), sorted as they are read;
    it holds nothing itself."""

    def __init__(self, keys: Mapping[str, Any]) -> None:
        super().__init__()
        self._keys = keys

    def __len__(self) -> int:
        return len(self._keys)

    def items(self) -> Iterator[tuple[str, Any]]:  # type: ignore[override]
        keys = self._keys
        if isinstance(keys, KeyTable):  # sorted as packed numbers, each key's text made as it is read
            return keys.sorted_items()
        return ((key, keys[key]) for key in sorted(keys))


def summary_chunks(summary: Mapping[str, Any], keys: Mapping[str, Any]) -> Iterator[str]:
    """json.dumps({**summary, "keys": dict(sorted(keys.items()))}, indent=1) + "\\n", a few thousand
    pieces at a time ("keys" where `summary` places it, else last)."""
    whole = {**summary, "keys": _SortedKeys(keys)}
    pieces: list[str] = []
    for piece in json.JSONEncoder(indent=1).iterencode(whole):
        pieces.append(piece)
        if len(pieces) >= PIECES:
            yield "".join(pieces)
            pieces.clear()
    pieces.append("\n")
    yield "".join(pieces)


def write_summary(path: Path, summary: Mapping[str, Any], keys: Mapping[str, Any]) -> None:
    """The summary written in one step (pipeline.llm.files.atomic_write_chunks), as summary_chunks
    gives it. Local state, beside the cache: it may lie anywhere, as the cache may."""
    atomic_write_chunks(path, summary_chunks(summary, keys), local_state=True)
