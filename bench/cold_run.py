"""A cold live run of the default experiment: no local cache, no recordings, the model answers
every call. Reports each stage's wall time and calls, to size the demo (issue: 15 min on 2 cores).

    .venv/bin/python bench/cold_run.py                 # params.yaml as it is
    .venv/bin/python bench/cold_run.py --limit 1       # the first transcript only

It works in a temporary folder, so the repository's cache, recordings and outputs are untouched.
"""

from __future__ import annotations

import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

import click

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.data.transcripts import load_transcripts
from pipeline.experiments.paper.assess import run_assess
from pipeline.experiments.paper.judge import run_judge
from pipeline.experiments.paper.params import load_paper_params
from pipeline.experiments.paper.refine import run_refine
from pipeline.llm.session import open_session


@click.command()
@click.option("--limit", type=int, default=None, help="Only the first N transcripts.")
@click.option("--max-iterations", type=int, default=None, help="Override refine.max_iterations.")
def main(limit: int | None, max_iterations: int | None) -> None:
    params = load_paper_params()
    if limit is not None:
        params = params.model_copy(update={"data": params.data.model_copy(update={"limit": limit})})
    if max_iterations is not None:
        refine = params.refine.model_copy(update={"max_iterations": max_iterations})
        params = params.model_copy(update={"refine": refine})
    transcripts = load_transcripts(params.data)
    by_id = {t.item_id: t for t in transcripts}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        started = time.perf_counter()

        def stage(name: str, work):
            began = time.perf_counter()
            with closing(open_session(params, name, root=root)) as session:
                result = work(session)
                calls = session.stats.model_calls
            click.echo(f"{name:9s} {time.perf_counter() - began:7.1f} s  {calls:4d} model calls", err=True)
            return result

        assessments = stage("assess", lambda s: run_assess(params, s, transcripts))
        judgements = stage("judge", lambda s: run_judge(params, s, by_id, assessments))
        refinements = stage(
            "refine",
            lambda s: run_refine(params, s, by_id, {a.item: a for a in assessments}, judgements),
        )
    iterations = [len(r.iterations) - 1 for r in refinements]
    click.echo(
        f"total     {time.perf_counter() - started:7.1f} s  for {len(transcripts)} transcripts, "
        f"refine iterations per item {iterations}",
        err=True,
    )


if __name__ == "__main__":
    main()
