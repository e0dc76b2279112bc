"""The `judgeloop` command: each behaviour is a named subcommand, defined in its own module.

    judgeloop audit     the recorded calls: prompts, replies, scores; `audit diff` between iterations
    judgeloop cache     stats, verify, gc, merge, seed, export of the local cache and the recordings
    judgeloop status    what the next `dvc repro` needs, and how many model calls it will make
    judgeloop judge-evaluate   judge a RAG answer, or a batch of rows, with the structured judge
    judgeloop report    the HTML report of the refinement loop
    judgeloop dvc-yaml  dvc.yaml, written from the designs' stage specs

All of them read what the pipeline writes (params.yaml, recordings/, the local cache, outputs/);
none keeps records of its own.
"""

from __future__ import annotations

from pathlib import Path

import click

from pipeline import __version__
from pipeline.experiments.rag.judge_evaluate import judge_evaluate
from pipeline.tools.audit.command import audit
from pipeline.tools.cache.command import cache
from pipeline.tools.calibrate import calibrate
from pipeline.tools.dvc_yaml import dvc_yaml
from pipeline.tools.status.command import status


@click.group()
@click.version_option(__version__, prog_name="judgeloop")
def main() -> None:
    """Reproducible, auditable LLM-as-a-judge experiments (see params.yaml and dvc.yaml)."""


main.add_command(audit)
main.add_command(cache)
main.add_command(status)
main.add_command(judge_evaluate)
main.add_command(calibrate)
main.add_command(dvc_yaml)


# --- report -------------------------------------------------------------------------------------
# The HTML rendering lives in pipeline/experiments/paper/report/html.py; it is imported when the
# command runs, so the other commands (and their tests) do not depend on it.
@main.command()
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("report.html"),
    show_default=True,
)
@click.option("--title", help="The page title (default: the backend and model of params.yaml).")
def report(output: Path, title: str | None) -> None:
    """Write the refinement loop's HTML report, as the aggregate stage does: an index page (--output) and
    beside it a folder of one page per item with every call it made (report/ for report.html)."""
    from pipeline.experiments.paper.aggregation import compute_metrics
    from pipeline.experiments.paper.report.html import load_records, write_report
    from pipeline.experiments.params import load_params
    from pipeline.loops.results import read_refinements

    params = load_params()
    refinements = read_refinements(Path(params.refine.out), params.judge.metrics)
    summary = compute_metrics(refinements, params.judge.metrics)
    records = load_records(Path(params.cache.recordings))
    title = title or f"judgeloop: {params.llm.backend}:{params.llm.model}"
    report = write_report(output, refinements, summary, records, title)
    click.echo(
        f"wrote {output} and {len(report.pages)} item pages in {output.parent / report.folder}/ "
        f"({len(refinements)} items, {len(records)} recorded calls)"
    )


# --- end report ---------------------------------------------------------------------------------


if __name__ == "__main__":
    main()
