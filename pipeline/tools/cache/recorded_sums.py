"""What `judgeloop cache verify` holds the local store against: each trusted recorded call's checksum.

A valid local entry may still disagree with the recording of the same call, which a run serves
instead (pipeline.llm.session), so the local one is never used; verify names it and `--repair`
drops it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pipeline.llm.keys import content_digest
from pipeline.llm.recordings import stage_folders
from pipeline.llm.recordings.pins import Pins
from pipeline.llm.records import CallRecord
from pipeline.tools.cache.verified_stages import stage_entries
from pipeline.tools.inventory import stage_calls


@dataclass(frozen=True, slots=True)
class Recorded:
    """What verify keeps of a trusted recorded call: where it is, and digests of it (its checksum
    covers the whole verified record; the reply's text digest says what differs)."""

    path: Path
    line: int
    checksum: str
    reply: str


@dataclass
class RecordedScan:
    calls: int = 0
    problems: list[str] = field(default_factory=list)


def _recorded(path: Path, line: int, record: CallRecord) -> Recorded:
    return Recorded(path, line, record.checksum, content_digest(record.reply.text))


def recorded_checksums(root: Path, pins: Pins | None) -> tuple[dict[str, Recorded], RecordedScan]:
    """Every trusted recorded call's key -> Recorded (the first in stage order), a stage at a time
    through its placed lines (pipeline.tools.cache.verified_stages); a stage that cannot be trusted
    whole is read tolerantly, for every problem; the count of calls read and every problem found."""
    found = RecordedScan()
    recorded: dict[str, Recorded] = {}
    for directory in stage_folders.stage_dirs(root):
        streamed = stage_entries(root, directory, pins, _recorded)
        if streamed is not None:
            entries, found_calls = streamed
            found.calls += found_calls
            for key, entry in entries.items():
                recorded.setdefault(key, entry)
            continue
        untrusted: set[tuple[Path, int]] = set()
        for path, line, call in stage_calls(root, directory, found.problems, pins, untrusted):
            found.calls += 1
            if (path, line) not in untrusted and call.record.key not in recorded:
                recorded[call.record.key] = _recorded(path, line, call.record)
    return recorded, found


def disagreement(local: CallRecord, recorded: Recorded | None) -> str | None:
    """Why a valid local entry may not stay: it holds another record than the recording of the same
    call, which a run serves instead (pipeline.llm.session); None when they agree or none is recorded.
    Both records verify, so the same checksum is the same record."""
    if recorded is None or recorded.checksum == local.checksum:
        return None
    same_text = recorded.reply == content_digest(local.reply.text)
    what = "another record (same reply text)" if same_text else "another reply"
    return (
        f"holds {what} than {recorded.path}:{recorded.line}, the stage's recording, which a run serves "
        "instead: the local entry is never used. Fix: drop it with `judgeloop cache verify --repair` (or "
        "take the recording's with `judgeloop cache seed --replace`)"
    )
