"""The regenerate step: the policy over every evaluated original (with `regenerate.enabled` false
it makes no call and delivers every original as it is)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pipeline.data.rag_rows import RagRow
from pipeline.experiments.regen.params import RegenParams, load_rows
from pipeline.experiments.steps import LLMStep, Upstream, jsonl_output, share
from pipeline.judges.quality.results import EvaluatedAnswer
from pipeline.llm.runner import run_items
from pipeline.llm.session import LLMSession
from pipeline.loops.regenerate import STAGE, Regeneration, regenerate


def run_regenerate(
    params: RegenParams,
    session: LLMSession,
    rows: Mapping[str, RagRow],
    originals: Sequence[EvaluatedAnswer],
) -> list[Regeneration]:
    def regenerate_one(original: EvaluatedAnswer) -> Regeneration:
        return regenerate(
            session,
            rows[original.item],
            original,
            params.regenerate,
            params.regen_generate,
            params.regen_evaluate,
            params.llm.options,
        )

    return run_items(session, originals, regenerate_one, STAGE)


@dataclass(frozen=True)
class RegenerateInputs:
    rows: Mapping[str, RagRow]
    originals: list[EvaluatedAnswer]


def regenerate_inputs(params: RegenParams, upstream: Upstream) -> RegenerateInputs:
    rows = {row.id: row for row in load_rows(params)}
    return RegenerateInputs(rows, upstream("regen_evaluate", jsonl_output(EvaluatedAnswer)))


def _outcome(results: list[Regeneration]) -> str:
    """The regenerations this stage made (attempt 1 on; the original was evaluated before)."""
    new = [a for r in results for a in r.attempts[1:]]
    unscored = share(sum(a.evaluation is None for a in new), len(new), "regenerations", "unscored")
    return f"{sum(len(r.attempts) > 1 for r in results)} of {len(results)} items regenerated, {unscored}"


STEP: LLMStep[RegenParams, RegenerateInputs, Regeneration] = LLMStep(
    inputs=regenerate_inputs,
    items=lambda inputs: [o.item for o in inputs.originals],
    work=lambda params, session, inputs: run_regenerate(params, session, inputs.rows, inputs.originals),
    output=jsonl_output(Regeneration),
    done=_outcome,
)
