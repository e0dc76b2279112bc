"""judge: score every assessment on each metric, 1-5, with the paper's prompts (params: judge, llm)."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.data.jsonl import read_jsonl, write_jsonl
from pipeline.data.transcripts import load_transcripts
from pipeline.experiments.paper.judge import run_judge
from pipeline.experiments.paper.params import load_paper_params
from pipeline.judges.rubric.results import Assessment
from pipeline.llm.stage import recorded_session


@click.command()
def main() -> None:
    params = load_paper_params()
    transcripts = {t.item_id: t for t in load_transcripts(params.data)}
    assessments = read_jsonl(Path(params.assess.out), Assessment)
    with recorded_session(params, "judge") as session:
        judgements = run_judge(params, session, transcripts, assessments)
    write_jsonl(Path(params.judge.out), judgements)


if __name__ == "__main__":
    main()
