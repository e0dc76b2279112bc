"""regen_generate: each RAG row's original answer (params: regen_generate, llm)."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.data.jsonl import write_jsonl
from pipeline.experiments.regen.generate import STAGE, run_generate
from pipeline.experiments.regen.params import load_regen_params, load_rows
from pipeline.llm.stage import recorded_session


@click.command()
def main() -> None:
    params = load_regen_params()
    rows = load_rows(params)
    with recorded_session(params, STAGE) as session:
        answers = run_generate(params, session, rows)
    write_jsonl(Path(params.regen_generate.out), answers)


if __name__ == "__main__":
    main()
