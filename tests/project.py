"""A tiny recorded experiment for the CLI tests: a project folder with data and params.yaml, run in
process with a scripted fake model, leaving what `dvc repro` leaves (outputs, recordings, cache,
run statistics)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipeline.data.jsonl import read_jsonl, write_jsonl
from pipeline.data.transcripts import load_transcripts
from pipeline.experiments.paper.assess import run_assess
from pipeline.experiments.paper.judge import run_judge
from pipeline.experiments.paper.params import PaperParams, load_paper_params
from pipeline.experiments.paper.refine import run_refine
from pipeline.judges.rubric.results import Assessment, AssessmentJudgements
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.session import open_session
from pipeline.llm.types import ChatRequest

MODEL = "scripted-judge"
TRANSCRIPTS = {
    "901": ["hi i'm ellie how are you", "i've been tired a lot lately", "do you sleep well", "not really no"],
    "902": ["hi i'm ellie where are you from", "i grew up in ohio", "how is work", "work is stressful"],
    "903": ["hi i'm ellie what do you enjoy", "i like hiking with my dog", "any worries", "money mostly"],
}
BASE_PARAMS: dict[str, Any] = {
    "llm": {"backend": "fake", "model": MODEL},
    "cache": {"dir": ".judgeloop/cache", "recordings": "recordings"},
    "data": {"transcripts": "data"},
    "assess": {"max_attempts": 2},
    "judge": {"max_attempts": 2},
    "refine": {"threshold": 3, "max_iterations": 3},
}


def scripted(request: ChatRequest) -> str:
    """Plausible replies that depend on the prompt: completeness is low until the assessment is revised."""
    first = request.messages[0].content
    judged = re.search(r"output for (\w+) only", first)
    if judged:
        metric = judged.group(1).lower()
        revised = "REVISED" in first
        score = 2 if metric == "completeness" and not revised else 4
        why = "now covers sleep and energy" if revised else "misses how often the sleep problems occur"
        return f"Explanation: the {metric} is judged here; the assessment {why}.\nScore: {score}"
    prompt = "\n".join(m.content for m in request.messages)
    revised = "EVALUATION FEEDBACK" in prompt
    quote = re.findall(r"Participant\s*:\s*(.+)", prompt)[0]
    tag = "REVISED assessment, sleep frequency added" if revised else "first assessment"
    return (
        f'<assessment>{tag}: mild low mood. <exact_quotes>"{quote}"</exact_quotes></assessment>\n'
        f"<PHQ8_symptoms>{'tired nearly every day; sleep poor most nights' if revised else 'tired'}"
        "</PHQ8_symptoms>\n<social_factors>not assessed in interview</social_factors>\n"
        "<biological_factors>not assessed in interview</biological_factors>\n"
        "<risk_factors>work stress</risk_factors>"
    )


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(out.get(key, {}), value) if isinstance(value, dict) else value
    return out


def write_params(root: Path, **sections: dict[str, Any]) -> PaperParams:
    """params.yaml = BASE_PARAMS with these sections merged over it."""
    merged = BASE_PARAMS
    for name, values in sections.items():
        merged = _merge(merged, {name: values})
    (root / "params.yaml").write_text(yaml.safe_dump(merged), encoding="utf-8")
    return load_paper_params(root / "params.yaml")


def write_data(root: Path, items: tuple[str, ...] = tuple(TRANSCRIPTS)) -> None:
    for item in items:
        folder = root / "data" / f"{item}_P"
        folder.mkdir(parents=True, exist_ok=True)
        rows = ["start_time\tstop_time\tspeaker\tvalue"]
        for n, text in enumerate(TRANSCRIPTS[item]):
            rows.append(f"{n}.0\t{n}.5\t{'Ellie' if n % 2 == 0 else 'Participant'}\t{text}")
        (folder / f"{item}_TRANSCRIPT.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")


def run_pipeline(
    root: Path, fake: FakeBackend, stages: tuple[str, ...] = ("assess", "judge", "refine")
) -> dict[str, int]:
    """Run the LLM stages as their modules do (auto mode; outputs, recordings, run statistics written).

    Returns the model calls each stage made."""
    params = load_paper_params(root / "params.yaml")
    transcripts = load_transcripts(params.data, root)
    by_item = {t.item_id: t for t in transcripts}
    made: dict[str, int] = {}
    for stage in stages:
        before = len(fake.calls)
        session = open_session(params, stage, root=root, backend_factory=lambda: fake)
        if stage == "assess":
            write_jsonl(root / params.assess.out, run_assess(params, session, transcripts))
        elif stage == "judge":
            assessments = read_jsonl(root / params.assess.out, Assessment)
            write_jsonl(root / params.judge.out, run_judge(params, session, by_item, assessments))
        else:
            assessments_by_item = {a.item: a for a in read_jsonl(root / params.assess.out, Assessment)}
            judgements = read_jsonl(root / params.judge.out, AssessmentJudgements)
            refinements = run_refine(params, session, by_item, assessments_by_item, judgements)
            write_jsonl(root / params.refine.out, refinements)
        session.close()
        made[stage] = len(fake.calls) - before
    return made


# One ask per metric and one refinement round: a recorded project small enough for a test of the stages.
ONE_ROUND: dict[str, dict[str, Any]] = {"judge": {"max_attempts": 1}, "refine": {"max_iterations": 1}}


def recorded_project(
    root: Path, items: tuple[str, ...] = tuple(TRANSCRIPTS), params: dict[str, dict[str, Any]] | None = None
) -> FakeBackend:
    """A project folder with data, params.yaml (BASE_PARAMS with `params` merged over) and a
    finished, recorded experiment."""
    write_data(root, items)
    write_params(root, **(params or {}))
    fake = FakeBackend(scripted, name=MODEL)
    run_pipeline(root, fake)
    return fake


def one_round_project(root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A recorded project with ONE_ROUND's params at root, made the working folder."""
    monkeypatch.chdir(root)
    recorded_project(root, params=ONE_ROUND)
    return root


def rejudge_all(root: Path) -> None:
    """ONE_ROUND's params with refine re-judging every metric after a round, not only the low ones."""
    write_params(root, **{**ONE_ROUND, "refine": {**ONE_ROUND["refine"], "rejudge": "all"}})
