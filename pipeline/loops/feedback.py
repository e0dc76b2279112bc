"""The feedback loop (paper Section 2.3.1): while any metric scores at or below the threshold, send
the judge's explanations back to the assessor, regenerate, and re-judge; at most max_iterations.
It is one policy of the shared loop (pipeline.loops.loop), beside regeneration on a low score.

Every iteration is kept (assessment, scores, explanations, the regeneration prompt) with the reason
the loop stopped. The original code's variants are parameters (pipeline.loops.settings.RefineSettings):
the threshold, whether an unscored metric triggers (the original's `if score and score <= 2` let a
failed parse pass), which assessment the regeneration prompt carries, re-judging all metrics or only
the low ones, and reporting the last or the best iteration.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from statistics import fmean
from typing import TYPE_CHECKING

from pipeline.judges.rubric.assessor import ask, transcript_block
from pipeline.judges.rubric.judge import judge_all
from pipeline.judges.rubric.prompts import (
    ASSESSMENT_SECTION,
    FEEDBACK_ITEM,
    FEEDBACK_ITEM_UNSCORED,
    METRIC_DESCRIPTIONS,
    REFINE_PROMPT,
    SYSTEM_PROMPT,
    with_speakers,
)
from pipeline.judges.rubric.results import Assessment, AssessmentJudgements, MetricJudgement, in_order
from pipeline.judges.rubric.settings import AssessSettings, JudgeSettings
from pipeline.llm.types import CallContext, Message, Options
from pipeline.loops.loop import Budget, Spent, best_round, run_loop
from pipeline.loops.results import Iteration, Refinement
from pipeline.loops.settings import RefineSettings

if TYPE_CHECKING:  # named only: the report imports this module without a session or the data
    from pipeline.data.transcripts import Transcript
    from pipeline.llm.session import LLMSession


def low_metrics(metrics: dict[str, MetricJudgement], settings: RefineSettings) -> tuple[str, ...]:
    return tuple(
        name
        for name, judged in metrics.items()
        if (judged.score is None and settings.unscored_triggers)
        or (judged.score is not None and judged.score <= settings.threshold)
    )


def feedback_text(metrics: dict[str, MetricJudgement], low: tuple[str, ...]) -> str:
    parts = []
    for name in low:
        judged = metrics[name]
        template = FEEDBACK_ITEM if judged.score is not None else FEEDBACK_ITEM_UNSCORED
        parts.append(
            template.format(
                metric_upper=name.upper(),
                score=judged.score,
                explanation=judged.explanation.strip(),
                description=METRIC_DESCRIPTIONS.get(name, name),
            )
        )
    return "\n".join(parts)


def regeneration_prompt(
    transcript: Transcript,
    history: list[Iteration],
    settings: RefineSettings,
    assess_settings: AssessSettings,
) -> str:
    last = history[-1]
    section = ""
    if settings.previous_assessment == "original":
        section = ASSESSMENT_SECTION.format(
            label="ORIGINAL ASSESSMENT", assessment=history[0].assessment.text
        )
    elif settings.previous_assessment == "previous":
        section = ASSESSMENT_SECTION.format(label="PREVIOUS ASSESSMENT", assessment=last.assessment.text)
    template = with_speakers(REFINE_PROMPT, transcript.interviewer, transcript.participant)
    return template.format(
        transcript=transcript_block(transcript, assess_settings),
        assessment_section=section,
        feedback=feedback_text(last.metrics, last.low_metrics),
    )


# The stop reasons of a loop cut short because its judge's replies could not be read.
UNSCORED_STOPS = {
    "all_unscored": "an iteration's every judgement was unscored (refine.stop_unscored)",
    "stage_unscored": "too many of the judge stage's judgements were unscored (refine.stop_unscored_share)",
}


def unscored_share(judgements: Iterable[AssessmentJudgements]) -> float:
    """The share of unscored judgements among `judgements` (0 when there are none), counted as they
    come (they may be read from their file an item at a time)."""
    judged = unscored = 0
    for j in judgements:
        judged += len(j.metrics)
        unscored += sum(m.score is None for m in j.metrics.values())
    return unscored / judged if judged else 0.0


def mean_score(metrics: dict[str, MetricJudgement]) -> float:
    scored = [m.score for m in metrics.values() if m.score is not None]
    return fmean(scored) if scored else float("-inf")


def all_unscored(iteration: Iteration) -> bool:
    return bool(iteration.metrics) and all(m.score is None for m in iteration.metrics.values())


class FeedbackPolicy:
    """The paper's policy for pipeline.loops.loop: regenerate while any metric is low, up to
    max_iterations; deliver the last iteration, or the best by mean score (refine.keep)."""

    def __init__(
        self,
        session: LLMSession,
        transcript: Transcript,
        settings: RefineSettings,
        assess_settings: AssessSettings,
        judge_settings: JudgeSettings,
        options: Options,
        halted: bool = False,
    ) -> None:
        self.session, self.transcript, self.settings, self.halted = session, transcript, settings, halted
        self.assess_settings, self.judge_settings, self.options = assess_settings, judge_settings, options
        self.budget = Budget(max_rounds=settings.max_iterations, round_limit_reason="max_iterations")

    def stop_reason(self, rounds: Sequence[Iteration]) -> str | None:
        if not rounds[-1].low_metrics:
            return "passed_initially" if len(rounds) == 1 else "passed"
        if self.settings.max_iterations == 0:
            return "disabled"
        if self.halted:
            return "stage_unscored"
        if len(rounds) > 1 and self.settings.stop_unscored and all_unscored(rounds[-1]):
            return "all_unscored"
        refused = self.budget.refusal(Spent(rounds=len(rounds) - 1), Spent(rounds=1))
        return refused[0] if refused else None

    def next_round(self, number: int, rounds: Sequence[Iteration]) -> Iteration:
        settings, last = self.settings, rounds[-1]
        prompt = regeneration_prompt(self.transcript, list(rounds), settings, self.assess_settings)
        context = CallContext(stage="refine", item=self.transcript.item_id, step=number)
        assessment = ask(
            self.session,
            self.transcript,
            (Message(role="system", content=SYSTEM_PROMPT), Message(role="user", content=prompt)),
            self.assess_settings,
            self.options,
            context.at(role="refine"),
        )
        to_judge = last.low_metrics if settings.rejudge == "low" else tuple(last.metrics)
        metrics = {
            name: judged.model_copy(update={"carried_over": True})
            for name, judged in last.metrics.items()
            if name not in to_judge
        }
        metrics.update(
            judge_all(
                self.session,
                self.transcript,
                assessment.text,
                to_judge,
                self.judge_settings,
                self.options,
                context,
            )
        )
        metrics = {name: metrics[name] for name in last.metrics}  # keep the metrics' order
        return Iteration(
            iteration=number,
            assessment=assessment,
            metrics=metrics,
            low_metrics=low_metrics(metrics, settings),
            regeneration_prompt=prompt,
        )

    def keep(self, rounds: Sequence[Iteration]) -> int:
        if self.settings.keep == "best":
            return best_round(rounds, lambda it: mean_score(it.metrics))
        return len(rounds) - 1


def refine(
    session: LLMSession,
    transcript: Transcript,
    initial_assessment: Assessment,
    initial_metrics: dict[str, MetricJudgement],
    settings: RefineSettings,
    assess_settings: AssessSettings,
    judge_settings: JudgeSettings,
    options: Options,
    *,
    halted: bool = False,
) -> Refinement:
    # Read back from a file, the metrics come sorted by name; the feedback lists them as configured.
    initial_metrics = in_order(initial_metrics, judge_settings.metrics)
    first = Iteration(
        iteration=0,
        assessment=initial_assessment,
        metrics=initial_metrics,
        low_metrics=low_metrics(initial_metrics, settings),
    )
    policy = FeedbackPolicy(session, transcript, settings, assess_settings, judge_settings, options, halted)
    outcome = run_loop(first, policy)
    return Refinement(
        item=transcript.item_id, iterations=outcome.rounds, stop_reason=outcome.stop_reason, kept=outcome.kept
    )
