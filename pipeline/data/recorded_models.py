"""Which model made a design's recorded calls: what a report names, read from the record itself.

A report never names its model from params.yaml: `llm` may have changed since its stages ran (or
point at another design's model), and an audit tool that mislabels its evidence is worse than none.
The model a report names is the one its stages' recordings hold (recordings/<stage>/calls.jsonl,
read and verified by pipeline.llm.recordings.stage_reader); where they hold several, the label says so, each
model with its number of calls, most used first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.llm.recordings import stage_folders, stage_reader

if TYPE_CHECKING:
    from pipeline.llm.recordings.verified_memo import VerifiedMemo

NONE_RECORDED = "no call recorded"


@dataclass(frozen=True)
class ModelUse:
    """One model (backend:name) and how many of the recorded calls it made, by version (digest)."""

    backend: str
    name: str
    calls: int
    digests: tuple[tuple[str, int], ...]  # (digest, calls), most used first

    @property
    def label(self) -> str:
        return f"{self.backend}:{self.name}"


def count_models(identities: Iterable[tuple[str, str, str]]) -> list[ModelUse]:
    """(backend, name, digest) of each call -> each model's use, most calls first (then by name)."""
    by_version = Counter(identities)
    models: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for (backend, name, digest), calls in by_version.items():
        models.setdefault((backend, name), []).append((digest, calls))
    uses = []
    for (backend, name), versions in models.items():
        ranked = tuple(sorted(versions, key=lambda v: (-v[1], v[0])))
        uses.append(ModelUse(backend, name, sum(c for _, c in versions), ranked))
    return sorted(uses, key=lambda u: (-u.calls, u.label))


def recorded_models(
    recordings_dir: Path, stages: Iterable[str], memo: VerifiedMemo | None = None
) -> list[ModelUse]:
    """The models that made the calls recorded by `stages` under `recordings_dir` (verified: a
    damaged recording stops the read, naming its line and the fix; content `memo` holds as verified
    in full is parsed but not verified again, as read_stage reads it)."""
    identities = []
    for stage in sorted(set(stages)):
        directory = stage_folders.stage_dir(recordings_dir, stage)
        for loaded in stage_reader.read_stage(directory, memo=memo):
            model = loaded.call.record.model
            identities.append((model.backend, model.name, model.digest))
    return count_models(identities)


def model_label(uses: list[ModelUse]) -> str:
    """What a report's title and facts name: `backend:name` when one model made every call; else
    each model with its calls ("several models: a (40 calls), b (12 calls)"); a model recorded in
    several versions says how many."""
    if not uses:
        return NONE_RECORDED
    parts = [_one(use, with_calls=len(uses) > 1) for use in uses]
    return parts[0] if len(parts) == 1 else "several models: " + ", ".join(parts)


def _one(use: ModelUse, *, with_calls: bool) -> str:
    notes = []
    if with_calls:
        notes.append(f"{use.calls:,} call{'s' if use.calls != 1 else ''}")
    if len(use.digests) > 1:
        notes.append(f"{len(use.digests)} versions: " + ", ".join(f"{d} {n:,}" for d, n in use.digests))
    return use.label + (f" ({'; '.join(notes)})" if notes else "")


def design_model(recordings_dir: Path, stages: Iterable[str], memo: VerifiedMemo | None = None) -> str:
    """model_label of the calls `stages` recorded (recorded_models)."""
    return model_label(recorded_models(recordings_dir, stages, memo))
