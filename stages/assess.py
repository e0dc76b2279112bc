"""assess: a qualitative assessment of every transcript (params: data, assess, llm)."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.config import load_params
from pipeline.experiment import run_assess
from pipeline.results import write_jsonl
from pipeline.stage import recorded_session
from pipeline.transcripts import load_transcripts


@click.command()
def main() -> None:
    params = load_params()
    transcripts = load_transcripts(params.data)
    with recorded_session(params, "assess") as session:
        assessments = run_assess(params, session, transcripts)
    write_jsonl(Path(params.assess.out), assessments)


if __name__ == "__main__":
    main()
