"""select_score: every candidate of every request scored on its criteria (params: selection, llm)."""

from __future__ import annotations

import click

from pipeline.data.jsonl import write_records
from pipeline.experiments.selection.files import SCORES
from pipeline.experiments.selection.params import load_selection_params
from pipeline.experiments.selection.pools import request_pools
from pipeline.experiments.selection.score import run_score
from pipeline.llm.stage import recorded_session


@click.command()
def main() -> None:
    params = load_selection_params()
    pools = request_pools(params.selection)
    with recorded_session(params, "select_score") as session:
        scored = run_score(params, session, pools)
    write_records(SCORES, (s.record() for s in scored))


if __name__ == "__main__":
    main()
