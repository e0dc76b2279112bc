"""A cold live rerun: every recorded embedded call of every demo made again, and how many come back
bit for bit, per design.

Each call in recordings/<stage>/ that the embedded model answered is asked again of a freshly
loaded embedded model (the settings in params.yaml, built as a stage's session builds it, an empty
cache: nothing is served from one), one at a time in the recording's order, as the pipeline asked
it, and compared with its recording by pipeline.llm.rerun: the key its request hashes to under the
live model's identity, and the reply's text, done reason, token counts and log-probabilities, byte
for byte. On the pinned build (pipeline.llm.llama_pin) every call should come back identical; a
difference is listed with its stage, item and what differed.

About 30 minutes on 2 cores for the ~350 calls (an assess call is up to 90 s). Run by hand:

    .venv/bin/python bench/live_rerun.py                  # every design
    .venv/bin/python bench/live_rerun.py --stage assess --limit 1
    .venv/bin/python bench/live_rerun.py --json out.json  # the per-call verdicts as well
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.experiments.registry import designs
from pipeline.llm.llama_pin import foreign_build
from pipeline.llm.recordings import stage_folders, stage_reader
from pipeline.llm.records import CallRecord
from pipeline.llm.rerun import live_backend, rerun
from pipeline.llm.settings import EngineSettings, load_settings

ROOT = Path(__file__).resolve().parents[1]


def design_of_stage() -> dict[str, str]:
    return {stage.name: design.name for design in designs() for stage in design.stages}


def embedded_calls(
    recordings_dir: Path, stages: list[str] | None, limit: int | None
) -> dict[str, list[CallRecord]]:
    """Per stage, its recorded calls the embedded model made (each key once)."""
    out: dict[str, list[CallRecord]] = {}
    for directory in stage_folders.stage_dirs(recordings_dir):
        if stages and directory.name not in stages:
            continue
        seen: dict[str, CallRecord] = {}
        for loaded in stage_reader.read_stage(directory):
            record = loaded.call.record
            if record.model.backend == "embedded" and record.reply.too_long is None:
                seen.setdefault(record.key, record)
        if seen:
            out[directory.name] = list(seen.values())[:limit]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", action="append", help="only this stage's recording (repeatable)")
    parser.add_argument("--limit", type=int, help="at most this many calls per stage")
    parser.add_argument("--json", type=Path, help="write every call's verdict here")
    args = parser.parse_args()

    settings = load_settings(EngineSettings, ROOT / "params.yaml", only_its_sections=True)
    calls = embedded_calls(ROOT / settings.cache.recordings, args.stage, args.limit)
    designs_of = design_of_stage()
    verdicts, per_design = [], Counter[tuple[str, str]]()
    builds: Counter[str] = Counter()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as empty_cache:
        backend = live_backend(settings.llm, Path(empty_cache))
        total = sum(len(records) for records in calls.values())
        done = 0
        for stage, records in calls.items():
            design = designs_of.get(stage, stage)
            for result in rerun(records, backend):
                done += 1
                differs = result.differs
                per_design[(design, "identical" if not differs else "different")] += 1
                for name in differs:
                    per_design[(design, f"differs:{name}")] += 1
                builds[foreign_build(result.reply.meta) or "pinned"] += 1
                verdicts.append(
                    {
                        "design": design,
                        "stage": stage,
                        "key": result.recorded.key,
                        "differs": list(differs),
                    }
                )
                print(
                    f"[{done}/{total} {time.perf_counter() - started:.0f}s] {stage} {result.recorded.key}: "
                    + ("identical" if not differs else "DIFFERS " + ",".join(differs)),
                    file=sys.stderr,
                    flush=True,
                )
        backend.close()
    elapsed = time.perf_counter() - started
    print(f"cold live rerun of every recorded embedded call, {elapsed:.0f} s, build: {dict(builds)}")
    print(f"{'design':<12} {'bit-identical':>14}  what differed")
    for design in sorted({d for d, _ in per_design}):
        same = per_design[(design, "identical")]
        all_ = same + per_design[(design, "different")]
        what = {
            k.split(":", 1)[1]: n
            for (d, k), n in per_design.items()
            if d == design and k.startswith("differs:")
        }
        print(f"{design:<12} {same:>6} / {all_:<6}  {what or ''}")
    same = sum(n for (_, k), n in per_design.items() if k == "identical")
    print(f"{'all':<12} {same:>6} / {len(verdicts):<6}")
    if args.json:
        args.json.write_text(json.dumps(verdicts, indent=1) + "\n")


if __name__ == "__main__":
    main()
