"""rag_judge: score every RAG row on the params' dimensions with the structured judge (params: rag, llm)."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.data.jsonl import write_jsonl
from pipeline.data.rag_rows import load_rag_rows
from pipeline.experiments.rag.judge import run_rag_judge
from pipeline.experiments.rag.params import load_rag_params
from pipeline.llm.stage import recorded_session


@click.command()
def main() -> None:
    params = load_rag_params()
    settings = params.rag
    rows = load_rag_rows(Path(settings.rows), only=settings.only, limit=settings.limit)
    with recorded_session(params, "rag_judge") as session:
        judgements = run_rag_judge(session, rows, settings, params.llm.options)
    write_jsonl(Path(settings.out), judgements)


if __name__ == "__main__":
    main()
