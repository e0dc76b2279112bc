"""regen_evaluate: every original answer scored by the evaluator (params: regen_evaluate, llm)."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.data.jsonl import read_jsonl, write_jsonl
from pipeline.experiments.regen.evaluate import STAGE, run_evaluate
from pipeline.experiments.regen.params import load_regen_params, load_rows
from pipeline.judges.quality.results import Answer
from pipeline.llm.stage import recorded_session


@click.command()
def main() -> None:
    params = load_regen_params()
    rows = {row.id: row for row in load_rows(params)}
    answers = read_jsonl(Path(params.regen_generate.out), Answer)
    with recorded_session(params, STAGE) as session:
        evaluated = run_evaluate(params, session, rows, answers)
    write_jsonl(Path(params.regen_evaluate.out), evaluated)


if __name__ == "__main__":
    main()
