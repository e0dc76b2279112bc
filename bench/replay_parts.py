"""What one replayed call costs, part by part, without a profiler's distortion: the paper's three LLM
stages replayed in this process (as bench/replay_profile.py does, on bench/million.py's synthetic
project), with each part's function wrapped by a timer of the calling thread's CPU time.

    .venv/bin/python bench/replay_parts.py --root /tmp/replay-10k   # made there first if new (--calls)

cProfile costs about four times the replay itself here, most of it in the many small functions of
the design's own Python, so its shares overstate them; a timer around a few dozen functions costs
about a microsecond a call of each (still several times a short function's own cost: read the
table for its shape; a part's real share is the whole process's CPU with that part switched off,
bench/README.md, "Replay CPU: what each part really costs"). Each part's time is inclusive (a part
inside another is counted in both: the table's indentation shows which holds which). The project,
and the replay around the timers (the local cache deleted first, as million.py's replay step does;
the recordings checked byte-identical after), are replay_profile.py's: bench/common.py.
"""

from __future__ import annotations

import functools
import importlib
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import replay_project, synthetic_project

# (indent, label, module, attribute path): each wrapped where it is defined and wherever a module
# imported it by name.
PARTS: tuple[tuple[int, str, str, str], ...] = (
    (0, "a call asked of the session (LLMSession.chat)", "pipeline.llm.session", "LLMSession.chat"),
    (1, "the cache key (request_key: canonical JSON, xxh3)", "pipeline.llm.keys", "request_key"),
    (1, "the lookup (LLMSession.lookup)", "pipeline.llm.session", "LLMSession.lookup"),
    (2, "the line served (StageIndex.call)", "pipeline.llm.recordings.stage_index", "StageIndex.call"),
    (3, "read back, digest checked (LineTable.text)", "pipeline.llm.recordings.offsets", "LineTable.text"),
    (3, "parsed (parse_call_line)", "pipeline.llm.recordings.line_checks", "parse_call_line"),
    (
        4,
        "blocks read back (LazyBlobs.__missing__)",
        "pipeline.llm.recordings.offsets",
        "LazyBlobs.__missing__",
    ),
    (2, "handed to the cache's seed (CallStore.seed)", "pipeline.llm.cache.store", "CallStore.seed"),
    (
        1,
        "added to the recording (StageRecording.add)",
        "pipeline.llm.recordings.stage_writer",
        "StageRecording.add",
    ),
    (
        2,
        "its line found (StageIndex.verbatim_at)",
        "pipeline.llm.recordings.stage_index",
        "StageIndex.verbatim_at",
    ),
    (
        0,
        "a recording verified (index_stage, per stage)",
        "pipeline.llm.recordings.stage_index",
        "index_stage",
    ),
    (1, "files hashed, lines placed (scan_folder)", "pipeline.llm.recordings.stage_index", "scan_folder"),
    (1, "each call line verified (trusted_call)", "pipeline.llm.recordings.line_checks", "trusted_call"),
    (2, "key and checksum (CallRecord.problem)", "pipeline.llm.records", "CallRecord.problem"),
    (
        0,
        "a recording read for its models (verified_models)",
        "pipeline.llm.recordings.recorded_models",
        "verified_models",
    ),
    (0, "the local cache seeded (CallStore.flush)", "pipeline.llm.cache.store", "CallStore.flush"),
    (
        0,
        "the recording written (StageRecording.write)",
        "pipeline.llm.recordings.stage_writer",
        "StageRecording.write",
    ),
    (0, "interviews indexed (index_transcripts)", "pipeline.data.transcripts", "index_transcripts"),
    (0, "an interview read (Transcripts.get)", "pipeline.data.transcripts", "Transcripts.get"),
    (0, "a transcript's text (Transcript.render)", "pipeline.data.transcripts", "Transcript.render"),
    (0, "judge prompt built (judge_prompt)", "pipeline.judges.rubric.judge", "judge_prompt"),
    (0, "a request built (ChatRequest())", "pipeline.llm.types", "ChatRequest.__init__"),
    (0, "a judge reply's score read (read_score)", "pipeline.judges.rubric.judge", "read_score"),
    (0, "an output line (jsonl._line)", "pipeline.data.jsonl", "_line"),
)


class Timers:
    def __init__(self) -> None:
        self.spent: dict[str, float] = defaultdict(float)
        self.count: dict[str, int] = defaultdict(int)
        self._depth = threading.local()

    def wrap(self, label: str, func: Callable[..., Any]) -> Callable[..., Any]:
        spent, count, depth = self.spent, self.count, self._depth
        clock = time.thread_time

        @functools.wraps(func)
        def timed(*args: Any, **kwargs: Any) -> Any:
            inside = getattr(depth, label, 0)
            if inside:  # a recursive call is counted once, at its outermost
                return func(*args, **kwargs)
            setattr(depth, label, 1)
            started = clock()
            try:
                return func(*args, **kwargs)
            finally:
                spent[label] += clock() - started
                count[label] += 1
                setattr(depth, label, 0)

        return timed


def install(timers: Timers) -> None:
    for _, label, module_name, path in PARTS:
        module = importlib.import_module(module_name)
        *owners, name = path.split(".")
        owner: Any = module
        for part in owners:
            owner = getattr(owner, part)
        if not hasattr(owner, name):
            continue  # not in this code (an older judgeloop's)
        original = (
            owner.__dict__.get(name, getattr(owner, name))
            if isinstance(owner, type)
            else getattr(owner, name)
        )
        wrapped = timers.wrap(label, original)
        setattr(owner, name, wrapped)
        if not owners:  # a module's function: wherever it was imported by name
            for other in list(sys.modules.values()):
                if other is not None and getattr(other, name, None) is original:
                    setattr(other, name, wrapped)


@click.command()
@click.option("--calls", type=int, default=10_000, show_default=True, help="Calls, when --root is new.")
@click.option("--chars", type=int, default=20_000, show_default=True, help="Characters an interview.")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), required=True)
def main(calls: int, chars: int, root: Path) -> None:
    synthetic_project(root, calls, chars)  # (recorded before the parts are timed)
    # Import what the stages import before wrapping, so that names imported by name are found.
    from pipeline.experiments.paper import assess, judge, refine  # noqa: F401
    from pipeline.judges.rubric import prompts  # noqa: F401

    timers = Timers()
    install(timers)
    result = replay_project(root)
    replayed = result.calls
    click.echo(result.line())
    click.echo(
        f"    {'part (thread CPU, inclusive)':<60} {'calls':>8} {'s':>7} {'us/call':>8} {'us/replayed':>11}"
    )
    for indent, label, _, _ in PARTS:
        seconds, count = timers.spent[label], timers.count[label]
        per = seconds / count * 1e6 if count else 0.0
        shown = "  " * indent + label
        click.echo(f"    {shown:<60} {count:8,} {seconds:7.2f} {per:8.1f} {seconds / replayed * 1e6:11.1f}")


if __name__ == "__main__":
    main()
