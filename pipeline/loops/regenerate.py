"""Regenerate on a low score, within a budget (seed 004): a policy of the shared loop
(pipeline.loops.loop), beside the paper's feedback loop.

The original answer (round 0) comes generated and evaluated. While the best answer so far scores
below `threshold` (0-1), and the budget allows another round, the answer is regenerated with the
latest answer's issues and improvement hint and evaluated again. The best-scoring answer is delivered,
ties to the earliest: when a regeneration is not better, the original is kept ("no gain, keep the
original"), so no delivered answer ever scored lower than the original.

Budgets are per item (pipeline.loops.loop.Budget): at most `max_regenerations` rounds, `call_budget`
calls and `latency_budget_s` seconds in all. A round is predicted at its most: one generation plus
every evaluation re-ask, each as slow as the slowest call measured for this item so far. Durations
are those recorded with each call (pipeline.llm.latency), so a replay takes the same decisions. A
round the budget refuses is not made, and the reason is recorded with its figures.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.data.jsonl import Result
from pipeline.data.rag_rows import RagRow
from pipeline.judges.quality.evaluator import evaluate
from pipeline.judges.quality.generator import generate, regeneration_instruction
from pipeline.judges.quality.results import EvaluatedAnswer
from pipeline.judges.quality.settings import EvaluateSettings, GenerateSettings
from pipeline.llm.latency import TimedCalls, total_seconds
from pipeline.llm.session import LLMSession
from pipeline.llm.types import CallContext, Options
from pipeline.loops.loop import Budget, Spent, best_round, run_loop
from pipeline.loops.regenerate_settings import RegenerateSettings

STAGE = "regen_regenerate"


class Regeneration(Result):
    item: str
    attempts: tuple[EvaluatedAnswer, ...]  # the original first
    # disabled | passed_initially | passed | unscored | max_regenerations | call_budget |
    # latency_budget | latency_unmeasured
    stop_reason: str
    stop_detail: str = ""  # the budget's figures when a budget stopped it
    kept: int  # the attempt delivered

    @property
    def delivered(self) -> EvaluatedAnswer:
        return self.attempts[self.kept]


def spent(rounds: Sequence[EvaluatedAnswer]) -> Spent:
    return Spent(
        rounds=len(rounds) - 1,
        calls=sum(r.call_count for r in rounds),
        seconds=total_seconds(r.seconds for r in rounds),
    )


def predicted_round(rounds: Sequence[EvaluatedAnswer], evaluate_settings: EvaluateSettings) -> Spent:
    """The next round at its most: a generation and every evaluation attempt (of every sample),
    each call as slow as the slowest measured so far for this item."""
    calls = 1 + evaluate_settings.max_attempts * evaluate_settings.samples
    measured = [s for r in rounds for s in r.call_seconds]
    slowest = (
        None
        if any(s is None for s in measured) or not measured
        else max(s for s in measured if s is not None)
    )
    return Spent(rounds=1, calls=calls, seconds=None if slowest is None else calls * slowest)


def quality_or_floor(answer: EvaluatedAnswer) -> float:
    return float("-inf") if answer.quality is None else answer.quality


class RegeneratePolicy:
    def __init__(
        self,
        session: LLMSession | TimedCalls,
        row: RagRow,
        settings: RegenerateSettings,
        generate_settings: GenerateSettings,
        evaluate_settings: EvaluateSettings,
        options: Options,
    ) -> None:
        self.calls = session if isinstance(session, TimedCalls) else TimedCalls(session)
        self.row, self.settings, self.options = row, settings, options
        self.generate_settings, self.evaluate_settings = generate_settings, evaluate_settings
        self.budget = Budget(
            max_rounds=settings.max_regenerations,
            calls=settings.call_budget,
            latency_s=settings.latency_budget_s,
            round_limit_reason="max_regenerations",
        )
        self.stop_detail = ""

    def stop_reason(self, rounds: Sequence[EvaluatedAnswer]) -> str | None:
        if not self.settings.enabled:
            return "disabled"
        best = rounds[self.keep(rounds)]
        if best.quality is None and not self.settings.unscored_triggers:
            return "unscored"
        if best.quality is not None and best.quality >= self.settings.threshold:
            return "passed_initially" if len(rounds) == 1 else "passed"
        refused = self.budget.refusal(spent(rounds), predicted_round(rounds, self.evaluate_settings))
        if refused is None:
            return None
        reason, self.stop_detail = refused
        return reason

    def next_round(self, number: int, rounds: Sequence[EvaluatedAnswer]) -> EvaluatedAnswer:
        context = CallContext(stage=STAGE, item=self.row.id, step=number)
        # The latest answer and its feedback (the seed's "previous response"): a second round then
        # asks something new, where the best one's feedback would repeat the first round's request.
        instruction = regeneration_instruction(rounds[-1])
        answer = generate(
            self.calls,
            self.row,
            self.generate_settings,
            self.options,
            context,
            attempt=number,
            instruction=instruction,
        )
        return evaluate(self.calls, self.row, answer, self.evaluate_settings, self.options, context)

    def keep(self, rounds: Sequence[EvaluatedAnswer]) -> int:
        return best_round(rounds, quality_or_floor)


def regenerate(
    session: LLMSession | TimedCalls,
    row: RagRow,
    original: EvaluatedAnswer,
    settings: RegenerateSettings,
    generate_settings: GenerateSettings,
    evaluate_settings: EvaluateSettings,
    options: Options,
) -> Regeneration:
    policy = RegeneratePolicy(session, row, settings, generate_settings, evaluate_settings, options)
    outcome = run_loop(original, policy)
    return Regeneration(
        item=row.id,
        attempts=outcome.rounds,
        stop_reason=outcome.stop_reason,
        stop_detail=policy.stop_detail,
        kept=outcome.kept,
    )
