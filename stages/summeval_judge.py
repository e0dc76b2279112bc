"""summeval_judge: rate every SummEval summary on each dimension, 1-5 (params: summeval, llm)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import click

from pipeline.data.jsonl import write_jsonl
from pipeline.data.summeval import load_summeval, subset
from pipeline.experiments.summeval.judge import STAGE, run_summeval_judge
from pipeline.experiments.summeval.params import load_summeval_params
from pipeline.llm.stage import recorded_session


@click.command()
def main() -> None:
    params = load_summeval_params()
    corpus = subset(load_summeval(Path(params.summeval.corpus)), params.summeval.documents)
    with recorded_session(params, STAGE) as session:
        judgements = run_summeval_judge(params, session, corpus)
    write_jsonl(Path(params.summeval.out), judgements)
    outcomes = Counter(j.failure or "scored" for j in judgements)
    click.echo(f"{STAGE}: " + ", ".join(f"{n} {kind}" for kind, n in sorted(outcomes.items())), err=True)


if __name__ == "__main__":
    main()
