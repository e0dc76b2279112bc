"""`judgeloop batch export | ingest | run` (see pipeline.tools.batch)."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.experiments.params import load_params
from pipeline.llm.terminal import echo
from pipeline.tools.batch.exchange import DEFAULT_FOLDER, export, ingest
from pipeline.tools.batch.manifest import REQUESTS_FILE
from pipeline.tools.batch.rounds import run_rounds
from pipeline.tools.batch.runners import CommandRunner, RayRunner, Runner

FOLDER = click.option(
    "--folder",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_FOLDER,
    show_default=True,
    help="Where the export is (requests.jsonl, manifest.jsonl).",
)


@click.group()
def batch() -> None:
    """The calls the next `dvc repro` needs, made by a batch job (vLLM, a batch API, Ray) in rounds.

    Needs llm.backend openai and llm.digest pinned: the replies are keyed by the weights."""


@batch.command("export")
@FOLDER
def export_command(folder: Path) -> None:
    """Write the calls the cache lacks as OpenAI Batch JSONL (custom_id = the cache key)."""
    exported = export(load_params(), folder)
    stages = ", ".join(f"{stage} {n}" for stage, n in exported.by_stage().items()) or "none"
    more = "" if exported.prediction.exact else " (later calls depend on their replies: export again after)"
    echo(f"{len(exported.calls)} calls ({stages}) in {folder / REQUESTS_FILE}{more}")


@batch.command("ingest")
@click.argument("results", type=click.Path(dir_okay=False, path_type=Path))
@FOLDER
def ingest_command(results: Path, folder: Path) -> None:
    """Check RESULTS (OpenAI Batch output) against the export and store its replies in the cache."""
    ingested = ingest(load_params(), results, folder)
    for problem in [*ingested.errors, *ingested.refused]:
        echo(problem, err=True)
    echo(ingested.summary())


@batch.command("run")
@click.option("--command", "template", help="A runner command: {in}, {out}, {model} are filled in.")
@click.option(
    "--ray", "ray_endpoint", metavar="URL", help="Ray Data, sending to this OpenAI-compatible endpoint."
)
@click.option("--concurrency", type=int, default=4, show_default=True, help="Ray: requests at once.")
@click.option("--ray-cpus", type=int, default=None, help="Ray: CPUs of a local Ray (no RAY_ADDRESS).")
@click.option("--max-rounds", type=int, default=100, show_default=True)
@click.option("-v", "--verbose", is_flag=True, help="List each round's calls.")
def run_command(
    template: str | None,
    ray_endpoint: str | None,
    concurrency: int,
    ray_cpus: int | None,
    max_rounds: int,
    verbose: bool,
) -> None:
    """Rounds of export -> runner -> ingest -> `dvc repro` until no call is missing; the last
    `dvc repro` replays every stage from the cache alone."""
    if (template is None) == (ray_endpoint is None):
        raise click.UsageError("give one runner: --command TEMPLATE or --ray URL")
    params = load_params()
    runner: Runner
    if template is not None:
        runner = CommandRunner(template, params.llm.model)
    else:
        assert ray_endpoint is not None
        runner = RayRunner(
            ray_endpoint, concurrency=concurrency, api_key_env=params.llm.api_key_env, num_cpus=ray_cpus
        )
    try:
        rounds = run_rounds(params, runner, max_rounds=max_rounds, echo=echo, verbose=verbose)
    finally:
        runner.close()
    made = sum(r.ingested.stored for r in rounds if r.ingested)
    echo(f"done: {len(rounds)} round(s), {made} replies stored; every stage replayed from the cache")
