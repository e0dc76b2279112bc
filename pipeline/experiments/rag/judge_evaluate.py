"""`judgeloop judge-evaluate`: judge one RAG answer, or a batch of rows, with the structured judge.

    judgeloop judge-evaluate "How do I ...?" --answer-file answer.json --context-file doc1.md [--json]
    judgeloop judge-evaluate --batch rows.jsonl --out scores.jsonl

The model, the dimensions and weights, and the prompt mode come from params.yaml (`llm`, `cache`,
`rag`), like the pipeline's. Every call goes through the cache and is recorded under
recordings/<stage>/ (`--stage`, default judge_evaluate; a plain name), so `judgeloop audit --stage
judge_evaluate` shows it, and a batch run again (after an interruption, say) makes no call it
already made. Runs add to the stage's recording, they never replace it (pipeline.llm.recordings.stage_writer):
two batches into one `--stage`, one after the other or at once, both keep every call, and a single
answer judged again under the same item replaces only that item's earlier calls.

The answer file is the RAG agent's RAGAnswer JSON ({"answer", "sources_used", "confidence",
"reasoning"}; only the answer and the source identifiers are shown to the judge) or plain text; a
file that opens like JSON ({ or [) but does not parse is refused with its line, never judged as text.
How a batch is read, judged and written (bad lines, rows too long for the context, the errors
file): pipeline.experiments.rag.batch.
"""

from __future__ import annotations

import hashlib
import json
from functools import partial
from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel, ConfigDict, ValidationError

from pipeline.data.input_files import decode, read_lines, refuse_surrogates
from pipeline.data.json_keys import REPEATED_FIX, RepeatedKey, loads_unique, repeated_problem
from pipeline.data.rag_rows import RagRow
from pipeline.errors import InputError, UnsafeNameError
from pipeline.experiments.params import require_params_file
from pipeline.experiments.rag.batch import check_outputs, run_batch
from pipeline.experiments.rag.judge import RagJudgement, run_rag_judge
from pipeline.experiments.rag.params import RagParams, load_rag_params
from pipeline.experiments.rag.settings import RagSettings
from pipeline.judges.structured.dimensions import judge_score_model
from pipeline.judges.structured.judge import ScoredDimensions, UnscoredDimensions
from pipeline.llm.files import safe_name
from pipeline.llm.keys import canonical_json
from pipeline.llm.progress import StageProgress
from pipeline.llm.recordings.owners import pipeline_stages
from pipeline.llm.recordings.stage_folders import STAGE_FIX
from pipeline.llm.records import RecordedCall
from pipeline.llm.session import LLMSession, open_session
from pipeline.llm.terminal import echo, shown

DEFAULT_STAGE = "judge_evaluate"


class RAGAnswer(BaseModel):
    """The seed's RAGAnswer, as a RAG agent writes it."""

    model_config = ConfigDict(extra="ignore")

    answer: str
    sources_used: list[str] = []
    confidence: float | None = None
    reasoning: str | None = None


def read_answer(path: Path) -> RAGAnswer:
    text = "\n".join(read_lines(path, str(path)))
    try:
        raw = loads_unique(text)
    except RepeatedKey as exc:  # json.loads kept the last value silently
        raise InputError(str(path), None, repeated_problem(exc.key, str(path)), REPEATED_FIX) from None
    except RecursionError:  # json's parser recurses: bounded by the interpreter's stack
        raise InputError(
            str(path), None, "JSON nested too deep to read", 'give {"answer": "...", "sources_used": [...]}'
        ) from None
    except json.JSONDecodeError as exc:
        if text.lstrip()[:1] in ("{", "["):
            raise InputError(
                str(path),
                exc.lineno,
                f"opens like JSON but is not JSON ({exc.msg}, column {exc.colno})",
                'repair the JSON ({"answer": "...", "sources_used": [...]}), or give plain text',
            ) from exc
        return RAGAnswer(answer=text.strip())
    refuse_surrogates(raw, str(path), None, text)  # json lets "\ud800" in; no recording can hold it
    if not isinstance(raw, dict):
        return RAGAnswer(answer=text.strip())
    try:
        return RAGAnswer.model_validate(raw)
    except ValidationError as exc:
        raise InputError(
            str(path),
            None,
            f"a JSON object but not a RAGAnswer ({exc.errors()[0]['msg']})",
            'write {"answer": "...", "sources_used": [...]} or plain text',
        ) from exc


def _context(path: Path) -> str:
    """A context file's text as given (a byte order mark kept, as the prompt always held it); an
    InputError naming the line of a byte that is not UTF-8."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return decode(data, str(path))  # raises: the same bytes, named with their line


def single_row(question: str, answer_file: Path, context_files: tuple[Path, ...], item: str | None) -> RagRow:
    answer = read_answer(answer_file)
    contexts = tuple(_context(p) for p in context_files)
    # The context files name the sources the judge reads; without them, the RAGAnswer's own ids.
    source_ids = tuple(p.name for p in context_files) if context_files else tuple(answer.sources_used)
    digest = hashlib.sha256(canonical_json([question, answer.answer, contexts]).encode()).hexdigest()[:10]
    return RagRow(
        id=item or f"q-{digest}",
        question=question,
        answer=answer.answer,
        contexts=contexts,
        source_ids=source_ids,
    )


def _not_in(items: set[str], call: RecordedCall) -> bool:
    return call.context.item not in items


def close_recording(session: LLMSession, ok: bool, *, replace_items: bool) -> None:
    """Add the run's calls to the stage's recording, keeping every call recorded before, by any
    run (a batch); replace_items (one answer): except the earlier calls of the items judged now."""
    items = {call.context.item for call in session.served} if replace_items else set()
    session.close(write_recording=ok, keep=partial(_not_in, items))


def pipeline_stage_names() -> set[str]:
    """Every stage name of the pipeline: ./dvc.yaml's, and every registered design's."""
    from pipeline.experiments.registry import designs  # the designs import this module's design

    return (pipeline_stages(Path(".")) or set()) | {
        stage.name for design in designs() for stage in design.stages
    }


def check_stage(ctx: click.Context, param: click.Parameter, stage: str) -> str:
    """A plain name that is no pipeline stage's: judge-evaluate adds to its folder's recording,
    and adding to a pipeline stage's would break that stage's pin in dvc.lock, and its replay."""
    try:
        name = safe_name(stage, "--stage", STAGE_FIX)
    except UnsafeNameError as exc:
        raise click.BadParameter(exc.message, ctx, param) from exc
    # Without case: where the file system ignores it (macOS, Windows) JUDGE's folder is judge's.
    if name.casefold() in {n.casefold() for n in pipeline_stage_names()}:
        raise click.BadParameter(
            f"'{name}' is a pipeline stage's name, and its recording is that stage's alone (pinned in "
            f"dvc.lock): judge-evaluate's calls added to it would break its replay. Fix: name a folder "
            f"of judge-evaluate's own, e.g. --stage judge_evaluate or --stage {name}_evaluate.",
            ctx,
            param,
        )
    return name


def run_judge_evaluate(
    params: RagParams, stage: str, rows: list[RagRow], *, replace_items: bool = False
) -> list[RagJudgement]:
    session = open_session(params, stage)
    progress = StageProgress(stage, None, mode=session.mode, unknown=f"judging {len(rows)} rows")
    progress.start()
    session.observe_served(progress.call)
    ok = False
    try:
        results = run_rag_judge(session, rows, params.rag, params.llm.options, stage)
        ok = True
    finally:
        progress.close()
        close_recording(session, ok, replace_items=replace_items)
    # The counts of the recording `judgeloop audit --stage` reads, which keeps earlier runs' calls too.
    stats = session.stats
    click.echo(
        f"{stage}: {session.recorded_calls} calls this run, {stats.hits} from cache, {stats.model_calls} to "
        f"the model; the recording holds {session.recorded_total} calls (judgeloop audit --stage {stage}; "
        f"{session.recordings_dir / stage})",
        err=True,
    )
    return results


def judge_score(verdict: ScoredDimensions, settings: RagSettings) -> dict[str, Any]:
    score = {"overall_score": verdict.overall, "reasoning": verdict.reasoning}
    score.update({name: d.value for name, d in verdict.dimensions.items()})
    score["confidence"] = verdict.confidence_value
    model = judge_score_model(settings.dimensions)
    return model.model_validate(score).model_dump(mode="json")


def _table(verdict: ScoredDimensions, settings: RagSettings) -> str:
    lines = [f"{'dimension':<20}{'1-5':>5}{'0-1':>7}{'weight':>8}{'p(score)':>10}"]
    for dim in settings.dimensions.items:
        s = verdict.dimensions[dim.name]
        p = "—" if s.logprob is None else f"{s.logprob.chosen_probability:.2f}"
        lines.append(f"{dim.name:<20}{s.score:>5}{s.value:>7.2f}{dim.weight:>8.2f}{p:>10}")
    lines.append(f"{'overall (weighted)':<20}{'':>5}{verdict.overall:>7.2f}")
    lp = "—" if verdict.logprob_confidence is None else f"{verdict.logprob_confidence:.2f}"
    lines.append(f"confidence: {verdict.confidence}/5 self-reported, {lp} from log-probabilities")
    lines.append(f"reasoning: {verdict.reasoning}")
    return "\n".join(lines)


@click.command("judge-evaluate")
@click.argument("question", required=False)
@click.option(
    "--answer-file",
    "-f",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The answer: RAGAnswer JSON or plain text.",
)
@click.option(
    "--context-file",
    "-c",
    "context_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="One retrieved source (repeatable); its file name is its identifier.",
)
@click.option("--id", "item", help="The item name in the recordings (default: a digest of the input).")
@click.option("--json", "as_json", is_flag=True, help="Print the JudgeScore as JSON instead of a table.")
@click.option("--batch", type=click.Path(dir_okay=False, path_type=Path), help="A JSONL file of RAG rows.")
@click.option(
    "--out", type=click.Path(dir_okay=False, path_type=Path), help="With --batch: the scores JSONL."
)
@click.option(
    "--errors",
    "errors_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="With --batch: where unreadable rows go (default: OUT with .errors.jsonl).",
)
@click.option("--sources", type=click.Choice(["full", "ids"]), help="Override rag.prompt_mode.")
@click.option(
    "--stage",
    default=DEFAULT_STAGE,
    show_default=True,
    callback=check_stage,
    help="The recordings folder's name (a plain name).",
)
def judge_evaluate(
    question: str | None,
    answer_file: Path | None,
    context_files: tuple[Path, ...],
    item: str | None,
    as_json: bool,
    batch: Path | None,
    out: Path | None,
    errors_path: Path | None,
    sources: str | None,
    stage: str,
) -> None:
    """Judge a RAG answer (QUESTION with --answer-file), or every row of --batch into --out.

    \b
    Examples:
      judgeloop judge-evaluate "How do I change the port?" --answer-file a.json --context-file s.md --json
      judgeloop judge-evaluate --batch data/rag-demo/rows.jsonl --out scores.jsonl
    """
    params = load_rag_params(require_params_file())
    if sources is not None:
        params = params.model_copy(update={"rag": params.rag.model_copy(update={"prompt_mode": sources})})
    if batch is not None:
        if question or answer_file or context_files:
            raise click.UsageError(
                "--batch judges a file of rows: give no QUESTION, --answer-file or --context-file"
            )
        if out is None:
            raise click.UsageError("--batch needs --out SCORES.jsonl")
        errors_path = errors_path or out.with_suffix(".errors.jsonl")
        check_outputs(batch, out, errors_path)
        run_batch(params, stage, batch, out, errors_path, partial(run_judge_evaluate, params, stage))
        return
    if not question or answer_file is None:
        raise click.UsageError("give QUESTION and --answer-file (or --batch ROWS.jsonl --out SCORES.jsonl)")
    row = single_row(question, answer_file, context_files, item)
    (result,) = run_judge_evaluate(params, stage, [row], replace_items=True)
    verdict = result.judgement
    if isinstance(verdict, UnscoredDimensions):
        raise click.ClickException(
            shown(
                f"the judge gave no usable reply after {verdict.attempts} attempt(s): {verdict.kind} "
                f"({verdict.error}). Recorded as failed; see it with: "
                f"judgeloop audit --stage {stage} --item {row.id}"
            )
        )
    if as_json:
        click.echo(json.dumps(judge_score(verdict, params.rag), indent=2, ensure_ascii=False))
    else:
        echo(_table(verdict, params.rag))  # the reasoning is the model's: shown escaped
