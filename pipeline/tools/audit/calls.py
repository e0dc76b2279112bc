"""The recorded calls `judgeloop audit` shows (pipeline.tools.audit.command), read one stage folder
at a time, unverified (an edited record is exactly what an auditor wants to see): the calls of a
folder that no stage of dvc.yaml owns and no run here wrote are marked untrusted, with the reason."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from pathlib import Path

from pipeline.errors import JudgeloopError
from pipeline.llm.recordings import key_reader, stage_folders, stage_reader
from pipeline.llm.recordings.item_reader import read_items
from pipeline.llm.recordings.item_table import tabled_items
from pipeline.llm.recordings.owners import recording_owners
from pipeline.llm.recordings.stage_reader import LoadedCall
from pipeline.llm.recordings.store import missing_here
from pipeline.llm.records import RecordedCall
from pipeline.tools.inventory import RunSummary

__all__ = ["Marks", "iter_calls", "load_calls", "unowned_folders"]


class Marks(dict[int, str]):
    """Why a call is not to be trusted beyond its own record, by id() of the call iter_calls made.
    Each marked call is held here too, so that its id() is never reused by a later call while the
    marks live (iter_calls streams, and the calls a filter drops are freed)."""

    def __init__(self) -> None:
        super().__init__()
        self._held: list[RecordedCall] = []

    def mark(self, call: RecordedCall, why: str) -> None:
        self[id(call)] = why
        self._held.append(call)


def iter_calls(
    root: Path,
    stages: Iterable[str] = (),
    untrusted: dict[str, str] | None = None,
    marks: Marks | None = None,
    items: Collection[str] = (),
    keys: Collection[str] = (),
) -> Iterator[RecordedCall]:
    """The recorded calls of `stages` (or every stage), one at a time, each folder's in file order: a
    filter keeps what it shows, so auditing one call of a million holds one stage's recording in
    memory, not every call. The calls of a folder in `untrusted` are marked in `marks` with its reason.
    `items`: only these items' calls: in a sharded recording with tables of items, only their lines
    read (pipeline.llm.recordings.item_table); otherwise the others' lines scanned, not parsed.
    `keys`: only these keys' calls, each looked up where its key puts it (in a sharded recording,
    the one shard of calls that holds it and the block shards its line names: key_reader.read_keys),
    so that auditing one call of a million reads a sixteenth of its stage, not every line."""
    wanted = set(stages)
    found = {d.name: d for d in stage_folders.stage_dirs(root)}
    unknown = wanted - found.keys()
    not_here = missing_here(root, tuple(sorted(unknown))) if unknown or not found else None
    if not_here is not None:  # pinned in dvc.lock, not pulled (cache.recordings_store: dvc)
        raise JudgeloopError(not_here)
    if unknown:
        have = ", ".join(sorted(found)) or "none"
        raise JudgeloopError(
            f"no recordings for stage(s) {', '.join(sorted(unknown))} under {root}/ (recorded: {have}). "
            "Fix: run the stage (dvc repro), or point cache.recordings at the experiment's recordings."
        )
    for name, directory in sorted(found.items()):
        if not wanted or name in wanted:
            why = untrusted.get(name) if untrusted else None
            for loaded in _stage_calls(directory, items, keys):
                if marks is not None and why is not None:
                    marks.mark(loaded.call, why)
                yield loaded.call


def _stage_calls(directory: Path, items: Collection[str], keys: Collection[str]) -> Iterator[LoadedCall]:
    # verify=False: an edited record is exactly what an auditor wants to see; it is marked instead.
    if keys:
        return key_reader.read_keys(directory, keys, verify=False)
    if items:  # through the stage's tables of items where they can be used; else every line scanned
        tabled = tabled_items(directory, items)
        return iter(tabled) if tabled is not None else read_items(directory, items)
    return stage_reader.read_stage(directory, verify=False)


def load_calls(root: Path, stages: Iterable[str] = ()) -> list[RecordedCall]:
    return list(iter_calls(root, stages))


def unowned_folders(root: Path, runs: dict[str, RunSummary]) -> dict[str, str]:
    """Why each stage folder under `root` that no stage of ./dvc.yaml owns, and for which no run here
    left a summary (judge-evaluate's), is untrusted; none to say without a dvc.yaml here."""
    owners = recording_owners(Path("."), root)
    if owners is None:
        return {}
    owned = {path.name for path in owners}
    return {
        d.name: f"{d} is owned by no stage of dvc.yaml and no judgeloop run here wrote it (not pinned)"
        for d in stage_folders.stage_dirs(root)
        if d.name not in owned and d.name not in runs
    }
