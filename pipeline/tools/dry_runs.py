"""How `judgeloop status` dry-runs each design's LLM stages: one function per design, in one list.

Each reads the stage's inputs as the stage's `main()` does (stages/*.py) and hands the plan the
same work function the stage runs, with the results it writes: a stage that runs is dry-run (no
model; pipeline.tools.probe) and its known results feed the next stage of the design; a stage DVC
skips is read from its output file. A new design adds its function to DRY_RUNS; a stage no
function covers is still shown as run or skipped, from DVC's graph. The first is the default
experiment's, the only one dry-run in a folder that is not a DVC project.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pipeline.data.jsonl import read_jsonl, read_records, write_records
from pipeline.data.rag_rows import load_rag_rows
from pipeline.data.summeval import load_summeval, subset
from pipeline.data.transcripts import Transcript, load_transcripts
from pipeline.experiments.paper.assess import run_assess
from pipeline.experiments.paper.judge import run_judge
from pipeline.experiments.paper.refine import run_refine
from pipeline.experiments.params import Params
from pipeline.experiments.rag.judge import RagJudgement, run_rag_judge
from pipeline.experiments.regen.evaluate import run_evaluate
from pipeline.experiments.regen.generate import run_generate
from pipeline.experiments.regen.params import load_rows
from pipeline.experiments.regen.regenerate import run_regenerate
from pipeline.experiments.selection.files import PICKS, SCORES
from pipeline.experiments.selection.pick import PickResult, run_pick
from pipeline.experiments.selection.pools import request_pools
from pipeline.experiments.selection.score import ScoredRequest, run_score
from pipeline.experiments.summeval.judge import judge_order, run_summeval_judge
from pipeline.experiments.summeval.results import SummEvalJudgement
from pipeline.judges.quality.results import Answer, EvaluatedAnswer
from pipeline.judges.rubric.results import Assessment, AssessmentJudgements
from pipeline.llm.keys import canonical_json
from pipeline.loops.regenerate import Regeneration
from pipeline.loops.results import Refinement
from pipeline.tools.probe import StageOutput, jsonl_output

if TYPE_CHECKING:  # status imports this module: the planner is only named here
    from pipeline.tools.status import Planner

T = TypeVar("T")


def paper(params: Params, plan: Planner) -> None:
    """assess -> judge -> refine (pipeline.experiments.paper)."""

    @cache
    def transcripts() -> dict[str, Transcript]:  # read only when one of the stages runs
        return {t.item_id: t for t in load_transcripts(params.data)}

    assess = plan.will_run("assess")
    if assess.runs:
        corpus = list(transcripts().values())
        assessments = plan.run(
            assess,
            lambda s: run_assess(params, s, corpus),
            list(transcripts()),
            jsonl_output(Path(params.assess.out), Assessment),
        )
    else:
        assessments = read_jsonl(Path(params.assess.out), Assessment)
    judge = plan.will_run("judge")
    if judge.runs:
        judgements = plan.run(
            judge,
            lambda s: run_judge(params, s, transcripts(), assessments),
            [a.item for a in assessments],
            jsonl_output(Path(params.judge.out), AssessmentJudgements),
        )
    else:
        judgements = read_jsonl(Path(params.judge.out), AssessmentJudgements)
    refine = plan.will_run("refine")
    if refine.runs:
        known = {a.item: a for a in assessments}
        inputs = [j for j in judgements if j.item in known]
        plan.run(
            refine,
            lambda s: run_refine(params, s, transcripts(), known, inputs),
            [j.item for j in inputs],
            jsonl_output(Path(params.refine.out), Refinement),
        )
    plan.will_run("aggregate")  # no calls; listed even with no DVC project, as the default's last stage


def rag(params: Params, plan: Planner) -> None:
    """rag_judge (pipeline.experiments.rag)."""
    judge = plan.will_run("rag_judge")
    if judge.runs:
        settings = params.rag
        rows = load_rag_rows(Path(settings.rows), only=settings.only, limit=settings.limit)
        plan.run(
            judge,
            lambda s: run_rag_judge(s, rows, settings, params.llm.options),
            [row.id for row in rows],
            jsonl_output(Path(settings.out), RagJudgement),
        )


def regen(params: Params, plan: Planner) -> None:
    """regen_generate -> regen_evaluate -> regen_regenerate (pipeline.experiments.regen)."""

    @cache
    def rows() -> dict[str, Any]:
        return {row.id: row for row in load_rows(params)}

    generate = plan.will_run("regen_generate")
    answers_out = Path(params.regen_generate.out)
    if generate.runs:
        answers = plan.run(
            generate,
            lambda s: run_generate(params, s, list(rows().values())),
            list(rows()),
            jsonl_output(answers_out, Answer),
        )
    else:
        answers = read_jsonl(answers_out, Answer)
    evaluate = plan.will_run("regen_evaluate")
    evaluated_out = Path(params.regen_evaluate.out)
    if evaluate.runs:
        evaluated = plan.run(
            evaluate,
            lambda s: run_evaluate(params, s, rows(), answers),
            [a.item for a in answers],
            jsonl_output(evaluated_out, EvaluatedAnswer),
        )
    else:
        evaluated = read_jsonl(evaluated_out, EvaluatedAnswer)
    regenerate = plan.will_run("regen_regenerate")
    if regenerate.runs:
        plan.run(
            regenerate,
            lambda s: run_regenerate(params, s, rows(), evaluated),
            [e.item for e in evaluated],
            jsonl_output(Path(params.regenerate.out), Regeneration),
        )


def _records_output(
    path: Path, item_of: Callable[[T], str], record: Callable[[T], dict[str, Any]]
) -> StageOutput[T]:
    # The selection stages write plain records (pipeline.data.jsonl.write_records).
    def write(to: Path, results: Sequence[T]) -> None:
        write_records(to, (record(r) for r in results))

    return StageOutput(path, item_of, lambda r: canonical_json(record(r)), write)


def selection(params: Params, plan: Planner) -> None:
    """select_score -> select_pick (pipeline.experiments.selection)."""
    score = plan.will_run("select_score")
    if score.runs:
        pools = request_pools(params.selection)
        scored = plan.run(
            score,
            lambda s: run_score(params, s, pools),
            [p.request.id for p in pools],
            _records_output(SCORES, lambda r: r.request.id, ScoredRequest.record),
        )
    else:
        scored = [ScoredRequest.from_record(r) for r in read_records(SCORES)]
    pick = plan.will_run("select_pick")
    if pick.runs:
        plan.run(
            pick,
            lambda s: run_pick(params, s, scored),
            [s.request.id for s in scored],
            _records_output(PICKS, lambda r: r.request, PickResult.record),
        )


def summeval(params: Params, plan: Planner) -> None:
    """summeval_judge (pipeline.experiments.summeval)."""
    judge = plan.will_run("summeval_judge")
    if judge.runs:
        settings = params.summeval
        corpus = subset(load_summeval(Path(settings.corpus)), settings.documents)
        order = judge_order(corpus, settings.dimensions)
        plan.run(
            judge,
            lambda s: run_summeval_judge(params, s, corpus),
            list(dict.fromkeys(summary.item for summary, _ in order)),
            jsonl_output(Path(settings.out), SummEvalJudgement),
        )


DRY_RUNS: tuple[Callable[[Params, Planner], None], ...] = (paper, regen, selection, summeval, rag)
