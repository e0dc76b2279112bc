"""The one loop every policy runs: judge, decide, improve with the judge's feedback, re-judge, keep.

    rounds = [first]                                  # round 0: made and judged upstream
    while (stop := policy.stop_reason(rounds)) is None:
        rounds.append(policy.next_round(len(rounds), rounds))
    kept = policy.keep(rounds)

A policy says when to stop (a pass, or a budget spent), how to make the next round (regenerate with
the feedback, then judge it again) and which round to deliver. Two policies run on it: the paper's
feedback loop (pipeline.loops.feedback: up to ten iterations while a metric is low) and
regeneration on a low score (pipeline.loops.regenerate: at most one regeneration, within call and
latency budgets, the original kept unless the new answer scores higher). What they share beyond
the loop is here too: `Budget`, which refuses a round that would pass a limit and says which, and
`best_round`, whose ties go to the earliest round (a later round must earn its place).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

R = TypeVar("R")


class Policy(Protocol[R]):
    def stop_reason(self, rounds: Sequence[R]) -> str | None:
        """Why the loop stops after these rounds, or None to make another."""
        ...

    def next_round(self, number: int, rounds: Sequence[R]) -> R:
        """Round `number` (1, 2, ...): improve on the rounds so far and judge the result."""
        ...

    def keep(self, rounds: Sequence[R]) -> int:
        """The index of the round delivered."""
        ...


@dataclass(frozen=True)
class Outcome(Generic[R]):
    rounds: tuple[R, ...]
    stop_reason: str
    kept: int


def run_loop(first: R, policy: Policy[R]) -> Outcome[R]:
    rounds = [first]
    while (stop := policy.stop_reason(rounds)) is None:
        rounds.append(policy.next_round(len(rounds), rounds))
    return Outcome(rounds=tuple(rounds), stop_reason=stop, kept=policy.keep(rounds))


def best_round(rounds: Sequence[R], score: Callable[[R], float]) -> int:
    """The highest-scoring round; ties go to the earliest, so an equal score keeps the original."""
    return max(range(len(rounds)), key=lambda i: (score(rounds[i]), -i))


@dataclass(frozen=True)
class Spent:
    """What an item's rounds have cost so far, or will cost (a prediction for the next round).
    `seconds` is None when a call's duration is unknown (a recording made before durations were
    kept)."""

    rounds: int = 0
    calls: int = 0
    seconds: float | None = 0.0


@dataclass(frozen=True)
class Budget:
    """Per-item limits. A round is refused when it would take the item past one; the reason names
    the limit. Calls are counted at their most (every re-ask), so the call budget is never passed;
    the next round's seconds are a measured prediction (see the policy), so the latency budget
    holds as long as no round runs slower than the prediction."""

    max_rounds: int
    calls: int | None = None
    latency_s: float | None = None
    round_limit_reason: str = "max_rounds"

    def refusal(self, spent: Spent, next_round: Spent) -> tuple[str, str] | None:
        """(reason, detail) when the next round must not start, else None."""
        if spent.rounds + next_round.rounds > self.max_rounds:
            return self.round_limit_reason, f"{spent.rounds} of {self.max_rounds} rounds made"
        if self.calls is not None and spent.calls + next_round.calls > self.calls:
            return (
                "call_budget",
                f"{spent.calls} calls made + up to {next_round.calls} more > {self.calls}",
            )
        if self.latency_s is not None:
            if spent.seconds is None or next_round.seconds is None:
                return (
                    "latency_unmeasured",
                    "a call's duration is unknown, so the latency budget cannot be kept",
                )
            if spent.seconds + next_round.seconds > self.latency_s:
                predicted = f"{next_round.seconds:.3f} s predicted"
                return "latency_budget", f"{spent.seconds:.3f} s spent + {predicted} > {self.latency_s} s"
        return None
