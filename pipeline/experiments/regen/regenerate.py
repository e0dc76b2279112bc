"""The regenerate step: the policy over every evaluated original (with `regenerate.enabled` false
it makes no call and delivers every original as it is)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pipeline.data.rag_rows import RagRow
from pipeline.experiments.regen.params import RegenParams, load_rows
from pipeline.experiments.steps import Done, LLMStep, Upstream, jsonl_output, share
from pipeline.judges.quality.results import EvaluatedAnswer
from pipeline.llm.runner import held, iter_items
from pipeline.llm.session import LLMSession
from pipeline.loops.regenerate import STAGE, Regeneration, regenerate


def stream_regenerate(
    params: RegenParams,
    session: LLMSession,
    rows: Mapping[str, RagRow],
    originals: Sequence[EvaluatedAnswer],
) -> Iterable[Regeneration]:
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

    return iter_items(session, originals, regenerate_one, STAGE)


run_regenerate = held(stream_regenerate)


@dataclass(frozen=True)
class RegenerateInputs:
    rows: Mapping[str, RagRow]
    originals: list[EvaluatedAnswer]


def regenerate_inputs(params: RegenParams, upstream: Upstream) -> RegenerateInputs:
    rows = {row.id: row for row in load_rows(params)}
    return RegenerateInputs(rows, upstream("regen_evaluate", jsonl_output(EvaluatedAnswer)))


def _regenerated(r: Regeneration) -> tuple[int, int]:
    """The regenerations one item made (attempt 1 on; the original was evaluated before), and how
    many of them are unscored."""
    new = r.attempts[1:]
    return len(new), sum(a.evaluation is None for a in new)


def _outcome(results: list[tuple[int, int]]) -> str:
    unscored = share(sum(u for _, u in results), sum(n for n, _ in results), "regenerations", "unscored")
    return f"{sum(n > 0 for n, _ in results)} of {len(results)} items regenerated, {unscored}"


STEP: LLMStep[RegenParams, RegenerateInputs, Regeneration] = LLMStep(
    inputs=regenerate_inputs,
    items=lambda inputs: [o.item for o in inputs.originals],
    stream=lambda params, session, inputs: stream_regenerate(params, session, inputs.rows, inputs.originals),
    output=jsonl_output(Regeneration),
    done=Done(_regenerated, _outcome),
)
