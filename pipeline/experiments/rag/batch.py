"""`judgeloop judge-evaluate --batch ROWS.jsonl --out SCORES.jsonl`: the rows read and checked, every
one judged, the scores written.

A line that is not a JSON object (a file cut short, another format) refuses the whole batch, naming
the file and line, before any call; a JSON object that is no RAG row (a field missing, an id used
twice) is written, with its line number, to the errors file and skipped. A row whose prompt does
not fit the model's context window is named by its file and line: recorded unscored (`too_long`)
and counted by default, or, with `llm.too_long: fail`, the batch stops there. The scores file is
replaced only once every row is judged, never left half-written, and never the batch itself.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from pipeline.data.input_files import json_objects
from pipeline.data.jsonl import write_jsonl, write_records
from pipeline.data.rag_rows import NOT_JSON_FIX, ROW_FIX, RagRow, rag_row_from
from pipeline.errors import InputError, PromptTruncatedError
from pipeline.experiments.rag.judge import RagJudgement
from pipeline.experiments.rag.params import RagParams
from pipeline.judges.structured.judge import UnscoredDimensions
from pipeline.llm.terminal import echo

Judge = Callable[[list[RagRow]], list[RagJudgement]]
TOO_LONG_FIX = (
    "shorten the row (rag.max_context_chars cuts each source), or raise llm.options.num_ctx (or the "
    "server's context)"
)


def read_batch(path: Path) -> tuple[list[RagRow], list[dict[str, Any]], dict[str, int]]:
    """The readable rows, one error record per JSON object that is not a row (with its line
    number), and each row's line by its id. InputError for a line that is not a JSON object."""
    shown = str(path)
    if not path.is_file():
        raise InputError(shown, None, "no such file", "give a JSONL file of RAG rows to --batch")
    rows: list[RagRow] = []
    errors: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for number, raw in json_objects(path, shown):
        if isinstance(raw, str):
            raise InputError(shown, number, raw, f"{NOT_JSON_FIX}; nothing was judged")
        try:
            row = rag_row_from(raw)
            if row.id in seen:
                raise ValueError(f"id {row.id} is already used on line {seen[row.id]}")
        except ValueError as exc:
            errors.append({"file": shown, "line": number, "problem": str(exc), "fix": ROW_FIX})
            continue
        seen[row.id] = number
        rows.append(row)
    return rows, errors, seen


def _same_file(first: Path, second: Path) -> bool:
    if first.exists() and second.exists():
        return first.samefile(second)  # a link, or two spellings of one path
    return first.resolve() == second.resolve()


def check_outputs(batch: Path, out: Path, errors_path: Path) -> None:
    """Refuse outputs that would overwrite the batch (or each other) before anything is read."""
    for option, path in (("--out", out), ("--errors", errors_path)):
        if _same_file(path, batch):
            raise click.BadParameter(
                f"{path} is the batch itself: writing there would replace the rows with the scores. "
                "Fix: give another file",
                param_hint=option,
            )
    if _same_file(out, errors_path):
        raise click.BadParameter(
            f"{out} is also the errors file. Fix: give --errors another file", param_hint="--errors"
        )


def run_batch(params: RagParams, stage: str, batch: Path, out: Path, errors_path: Path, judge: Judge) -> None:
    """Judge the batch's rows with `judge` (judge-evaluate's recorded session) into `out`."""
    rows, errors, lines = read_batch(batch)
    for error in errors:
        echo(f"{error['file']}:{error['line']}: {error['problem']} (skipped)", err=True)  # names the row
    if errors:
        write_records(errors_path, errors)
    elif errors_path.exists():
        errors_path.unlink()  # a stale errors file would describe another run
    if not rows:
        raise click.ClickException(f"{batch}: no readable row. Fix: {ROW_FIX}")
    try:
        results = judge(rows)
    except PromptTruncatedError as exc:
        if exc.item not in lines:
            raise
        fix = (
            f"{TOO_LONG_FIX}; or set llm.too_long: unscored to record such rows unscored and judge the others"
        )
        raise InputError(str(batch), lines[exc.item], f"row {exc.item}: {exc.message}", fix) from exc
    write_jsonl(out, results)
    failed = {r.item: r.judgement for r in results if isinstance(r.judgement, UnscoredDimensions)}
    too_long = [item for item, judgement in failed.items() if judgement.kind == "too_long"]
    for item in too_long:
        echo(
            f"{batch}:{lines[item]}: row {item}: the prompt does not fit the model's context window; "
            f"recorded unscored (too_long). Fix: {TOO_LONG_FIX}; llm.too_long: fail stops the batch instead",
            err=True,
        )
    click.echo(
        f"wrote {out}: {len(results) - len(failed)} scored, {len(failed)} failed (recorded, not scored"
        + (f"; {len(too_long)} too long for the context" if too_long else "")
        + ")"
        + (f"; {len(errors)} unreadable row(s) in {errors_path}" if errors else ""),
        err=True,
    )
    if results and len(failed) == len(results):
        kinds = Counter(judgement.kind for judgement in failed.values())
        why = ", ".join(f"{count} {kind}" for kind, count in kinds.most_common(3))
        raise click.ClickException(
            f"no row of {batch} was scored ({why}). The replies are recorded: read them with "
            f"`judgeloop audit --stage {stage}`; a reply cut short may need a larger rag.num_predict."
        )
