"""What a stage process pays to learn which models made another stage's recorded calls (the model's
identity), read as before (folder_scan.verified_models: every file hashed, every call line's model
parsed) and through the private memo of the files' hashes (models_memo.models), on a replayed
project whose recordings the verified memo holds (a warm replay's state).

    nice -n 19 .venv/bin/python bench/models_memo.py --root /tmp/replay-10k

Each stage's recording is read `--rounds` times each way, alternately; the CPU time (process time)
of each read is printed as the median and range, in ms a read and in us a call of a replay through
stage processes, where each of the three stages reads the two others'. The memo is made (and
checked to answer) first. Nothing is written but the memo.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.llm.recordings import models_memo, stage_folders
from pipeline.llm.recordings.folder_scan import verified_models
from pipeline.llm.recordings.pins import Pins
from pipeline.llm.recordings.stage_index import index_stage
from pipeline.llm.recordings.verified_memo import VerifiedMemo


def _timed(read: Callable[[Path, Pins, VerifiedMemo], object], *args: Any) -> float:
    started = time.process_time()
    read(*args)
    return time.process_time() - started


@click.command()
@click.option("--root", type=click.Path(file_okay=False, exists=True, path_type=Path), required=True)
@click.option("--rounds", type=int, default=7, show_default=True)
@click.option("--calls", type=int, default=None, help="Calls of the replay (default: the recorded keys).")
def main(root: Path, rounds: int, calls: int | None) -> None:
    recordings = root / "recordings"
    pins = Pins(root, recordings)
    memo = VerifiedMemo.beside(root / ".judgeloop" / "cache")
    keys = 0
    for directory in stage_folders.stage_dirs(recordings):
        keys += len(index_stage(directory, pins=pins, memo=memo).at)  # verified (or found verified)
        expected = verified_models(directory, pins, memo)
        if expected is None or models_memo.models(directory, pins, memo) != expected:
            raise click.ClickException(f"{directory}: not answered as verified_models answers")
    total = {"before": 0.0, "memo": 0.0}
    for directory in stage_folders.stage_dirs(recordings):
        times: dict[str, list[float]] = {"before": [], "memo": []}
        for _ in range(rounds):
            times["before"].append(_timed(verified_models, directory, pins, memo))
            times["memo"].append(_timed(models_memo.models, directory, pins, memo))
        shown = []
        for way, spent in times.items():
            total[way] += 2 * statistics.median(spent)  # read by the two other stages' processes
            low, mid, high = min(spent) * 1e3, statistics.median(spent) * 1e3, max(spent) * 1e3
            shown.append(f"{way} {mid:.2f} ms ({low:.2f}-{high:.2f})")
        click.echo(f"{directory.name}: " + ", ".join(shown))
    per = calls or keys
    per_call = ", ".join(
        f"{way} {spent * 1e3:.0f} ms, {spent / per * 1e6:.1f} us a call" for way, spent in total.items()
    )
    click.echo(
        f"{per} calls; a replay through stage processes (each stage reads the two others'): {per_call}"
    )


if __name__ == "__main__":
    main()
