"""A synthetic experiment of the paper's design at any size, on the fake backend: for the scale
bench (bench/million.py) and the end-to-end test at 10k calls (tests/test_scale.py).

N interviews of about 20 kB each in the DAIC-WOZ layout, each its own (every one of an item's
calls carries its transcript: the assessment, four judge metrics, each refinement round and its
re-judging), the paper's text protocol, and the experiment responder
(pipeline.testing.judge_responder: first assessments score low on some metrics, so refinement runs;
every seventh judge reply forgets its score, so re-asks run): about 10 calls an interview.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from pipeline.llm.types import ChatRequest
from pipeline.testing.judge_responder import experiment_responder

CALLS_PER_ITEM = 10.0  # measured (9-10): assessment, 4 judgements, re-asks, a refinement round and its 4
FIRST_ITEM = 10000
MODEL = "synthetic-model"


def transcript(item: int, chars: int) -> str:
    """A DAIC-WOZ style transcript (tab-separated) of about `chars` characters, its own for each item."""
    rows = ["start_time\tstop_time\tspeaker\tvalue"]
    size, line = 0, 0
    while size < chars:
        speaker = "Ellie" if line % 2 == 0 else "Participant"
        said = (
            f"interview {item} turn {line}: about sleep, work and the weekend ({(item * 7919 + line) % 997})"
        )
        rows.append(f"{line}.0\t{line}.5\t{speaker}\t{said}")
        size += len(said) + 14
        line += 1
    return "\n".join(rows) + "\n"


def items_for(calls: int) -> int:
    return max(1, round(calls / CALLS_PER_ITEM))


def make_project(root: Path, items: int, chars: int, params_file: Path) -> None:
    """data/ with `items` interviews and params.yaml (`params_file` with the fake backend, every
    interview, the text protocol and up to three refinement rounds)."""
    for item in range(FIRST_ITEM, FIRST_ITEM + items):
        folder = root / "data" / f"{item}_P"
        folder.mkdir(parents=True)
        (folder / f"{item}_TRANSCRIPT.csv").write_text(transcript(item, chars), encoding="utf-8")
    params = yaml.safe_load(params_file.read_text(encoding="utf-8"))
    params["llm"].update(backend="fake", model=MODEL, parallelism=4)
    params["llm"]["options"]["num_ctx"] = 32768
    params["data"].update(transcripts="data", limit=None)
    params["assess"]["output"] = params["judge"]["output"] = "text"  # the paper's protocol
    params["refine"]["max_iterations"] = 3
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")


def audit_one_judgement(items: int) -> tuple[str, list[str]]:
    """The middle item, and the `judgeloop audit` arguments that show one judgement of it: its
    first judge call on accuracy (the command a reader runs to see one call of a large run)."""
    item = str(FIRST_ITEM + items // 2)
    return item, ["audit", "--stage", "judge", "--item", item, "--iteration", "0", "--metric", "accuracy"]


def responder(request: ChatRequest) -> str:
    return experiment_responder(request.model_dump(mode="json"))


def run_stages(root: Path, mode: str) -> int:
    """The paper's three LLM stages in this process, as their DVC stages run them (each step's
    inputs read from the earlier stages' files, its results written as they come while its session
    is open, its recording written), in cache mode `mode`; the calls they made or replayed. No dry
    run: the step runs once, for real."""
    from pipeline.data.jsonl import write_jsonl
    from pipeline.experiments.paper import assess, judge, refine
    from pipeline.experiments.paper.design import DESIGN
    from pipeline.experiments.paper.params import load_paper_params
    from pipeline.experiments.steps import LLMStep, Output
    from pipeline.llm.backends.fake import FakeBackend
    from pipeline.llm.session import open_session

    here = Path.cwd()
    os.chdir(root)  # the stages' paths are the project's, as DVC runs them
    try:
        params = load_paper_params(Path("params.yaml"))
        params = params.model_copy(update={"cache": params.cache.model_copy(update={"mode": mode})})
        fake = FakeBackend(responder, name=MODEL, parallelism=4, keep_requests=False)
        calls = 0

        class Upstream:  # as stages.runner.FileUpstream reads them: whole, or again an item at a time
            def __call__(self, stage: str, output: Output[Any]) -> list[Any]:
                assert output.read is not None
                return output.read(DESIGN.results_path(stage, params))

            def file(self, stage: str, output: Output[Any]) -> Iterable[Any]:
                assert output.file is not None
                return output.file(DESIGN.results_path(stage, params))

        def stage(name: str, step: LLMStep[Any, Any, Any]) -> None:
            nonlocal calls
            inputs = step.inputs(params, Upstream())
            session = open_session(params, name, root=Path("."), backend_factory=lambda: fake)
            write_jsonl(DESIGN.results_path(name, params), step.stream(params, session, inputs))
            calls += session.recorded_calls
            session.close(write_recording=True)

        stage("assess", assess.STEP)
        stage("judge", judge.STEP)
        stage("refine", refine.STEP)
        return calls
    finally:
        os.chdir(here)
