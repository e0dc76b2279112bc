"""assess: a qualitative assessment of every transcript (params: data, assess, llm)."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.data.jsonl import write_jsonl
from pipeline.data.transcripts import load_transcripts
from pipeline.experiments.paper.assess import run_assess
from pipeline.experiments.paper.params import load_paper_params
from pipeline.llm.stage import recorded_session


@click.command()
def main() -> None:
    params = load_paper_params()
    transcripts = load_transcripts(params.data)
    with recorded_session(params, "assess") as session:
        assessments = run_assess(params, session, transcripts)
    write_jsonl(Path(params.assess.out), assessments)


if __name__ == "__main__":
    main()
