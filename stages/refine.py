"""refine: the feedback loop over every judged assessment (params: refine, assess, judge, llm)."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.data.jsonl import read_jsonl, write_jsonl
from pipeline.data.transcripts import load_transcripts
from pipeline.experiments.paper.params import load_paper_params
from pipeline.experiments.paper.refine import run_refine
from pipeline.judges.rubric.results import Assessment, AssessmentJudgements
from pipeline.llm.stage import recorded_session


@click.command()
def main() -> None:
    params = load_paper_params()
    transcripts = {t.item_id: t for t in load_transcripts(params.data)}
    assessments = {a.item: a for a in read_jsonl(Path(params.assess.out), Assessment)}
    judgements = read_jsonl(Path(params.judge.out), AssessmentJudgements)
    with recorded_session(params, "refine") as session:
        refinements = run_refine(params, session, transcripts, assessments, judgements)
    write_jsonl(Path(params.refine.out), refinements)


if __name__ == "__main__":
    main()
