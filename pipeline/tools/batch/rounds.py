"""`judgeloop batch run`: rounds of export -> runner -> ingest -> dvc repro until nothing is missing.

A loop asks again with the model's last reply, so the calls of a whole experiment cannot go in one
batch: each round exports the calls whose requests are known now (the status planner's dry run
against the cache: pipeline.tools.status), has the runner answer them, and ingests the results.
Every stage whose calls the cache then answers in full is reproduced at the start of the next
round (`dvc repro STAGE...` with JUDGELOOP_CACHE_MODE=replay, so it can call no model), and the
rounds go on until the planner finds no call missing; a last `dvc repro`, in replay mode again,
runs every stage left from the cache alone. A round that stores no reply stops the run (the same
calls would be exported again): its errors are printed, and what was stored stays in the cache,
so the next `batch run` goes on from there.

Round N's files are kept in .judgeloop/batch/round-NNN/ (requests, manifest, results).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import BackendError
from pipeline.llm.settings import EngineSettings
from pipeline.tools.batch.exchange import Export, Ingested, export, ingest, planned_calls
from pipeline.tools.batch.manifest import REQUESTS_FILE
from pipeline.tools.batch.runners import Runner
from pipeline.tools.status.prediction import Prediction

RESULTS_FILE = "results.jsonl"
ROUNDS_FOLDER = Path(".judgeloop/batch")


@dataclass
class Round:
    number: int
    exported: Export
    ingested: Ingested | None = None

    def describe(self) -> str:
        stages = ", ".join(f"{stage} {n}" for stage, n in self.exported.by_stage().items())
        later = "" if self.exported.prediction.exact else "; later rounds follow from their replies"
        calls = len(self.exported.calls)
        return f"round {self.number}: {calls} call{'s' if calls != 1 else ''} ({stages}){later}"


def complete_stages(prediction: Prediction) -> list[str]:
    """The LLM stages that run and whose every call the cache answers (their inputs known too)."""
    return [
        s.stage
        for s in prediction.stages
        if s.runs and s.probe is not None and not s.probe.model_calls and s.exact
    ]


def dvc_repro(*targets: str) -> None:
    """`dvc repro` in replay mode, with this Python's environment first on the PATH (the stages run
    `python -m stages`)."""
    env = {**os.environ, "JUDGELOOP_CACHE_MODE": "replay"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run([sys.executable, "-m", "dvc", "repro", "--quiet", *targets], env=env, check=False)
    if done.returncode != 0:
        which = " ".join(targets) or "every stage"
        raise BackendError(f"`dvc repro {which}` (replay mode) failed, exit {done.returncode}: see above")


def run_rounds(
    params: EngineSettings,
    runner: Runner,
    *,
    max_rounds: int = 100,
    folder: Path = ROUNDS_FOLDER,
    echo: Callable[[str], None] = print,
    repro: Callable[..., None] = dvc_repro,
    verbose: bool = False,
) -> list[Round]:
    """verbose: list each round's calls (stage, item, step, labels, key), as `judgeloop status -v`."""
    rounds: list[Round] = []
    reproduced: set[str] = set()
    for number in range(1, max_rounds + 1):
        prediction, calls = planned_calls(params)
        ready = [stage for stage in complete_stages(prediction) if stage not in reproduced]
        if ready and calls:
            echo(f"reproducing {', '.join(ready)} from the cache")
            repro(*ready)
            reproduced.update(ready)
        if not calls:
            echo(f"no call missing after {number - 1} round(s): the last `dvc repro`, from the cache alone")
            repro()
            return rounds
        where = folder / f"round-{number:03d}"
        current = Round(number, export(params, where, (prediction, calls)))
        rounds.append(current)
        echo(current.describe())
        for call in calls if verbose else ():
            echo(f"  {call.context.describe()} key {call.key}")
        runner.run(where / REQUESTS_FILE, where / RESULTS_FILE)
        current.ingested = ingested = ingest(params, where / RESULTS_FILE, where)
        echo(f"  {ingested.summary()}")
        for problem in [*ingested.errors, *ingested.refused][:20]:
            echo(f"  {problem}")
        if ingested.stored == 0:
            raise BackendError(
                f"round {number} stored no reply, so the next would export the same calls. Fix what the "
                f"errors above say (the runner's files are in {where}), then `judgeloop batch run` again: "
                "what earlier rounds stored stays in the cache."
            )
    raise BackendError(
        f"calls are still missing after {max_rounds} rounds. Fix: raise --max-rounds, or see "
        "`judgeloop status` for the stages that keep asking."
    )
