"""regen_regenerate: the regeneration policy over every evaluated answer (params: regenerate,
regen_generate, regen_evaluate, llm)."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.data.jsonl import read_jsonl, write_jsonl
from pipeline.experiments.regen.params import load_regen_params, load_rows
from pipeline.experiments.regen.regenerate import run_regenerate
from pipeline.judges.quality.results import EvaluatedAnswer
from pipeline.llm.stage import recorded_session
from pipeline.loops.regenerate import STAGE


@click.command()
def main() -> None:
    params = load_regen_params()
    rows = {row.id: row for row in load_rows(params)}
    originals = read_jsonl(Path(params.regen_evaluate.out), EvaluatedAnswer)
    with recorded_session(params, STAGE) as session:
        regenerations = run_regenerate(params, session, rows, originals)
    write_jsonl(Path(params.regenerate.out), regenerations)


if __name__ == "__main__":
    main()
