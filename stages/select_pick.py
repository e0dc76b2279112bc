"""select_pick: near ties judged in both orders, the diverse top k, explanations (params: selection, llm)."""

from __future__ import annotations

import click

from pipeline.data.jsonl import read_records, write_records
from pipeline.experiments.selection.files import PICKS, SCORES
from pipeline.experiments.selection.params import load_selection_params
from pipeline.experiments.selection.pick import run_pick
from pipeline.experiments.selection.score import ScoredRequest
from pipeline.llm.stage import recorded_session


@click.command()
def main() -> None:
    params = load_selection_params()
    scored = [ScoredRequest.from_record(r) for r in read_records(SCORES)]
    with recorded_session(params, "select_pick") as session:
        picks = run_pick(params, session, scored)
    write_records(PICKS, (p.record() for p in picks))


if __name__ == "__main__":
    main()
