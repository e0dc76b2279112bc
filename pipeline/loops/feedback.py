"""The feedback loop (paper Section 2.3.1): while any metric scores at or below the threshold, send
the judge's explanations back to the assessor, regenerate, and re-judge; at most max_iterations.

Every iteration is kept (assessment, scores, explanations, the regeneration prompt) with the reason
the loop stopped. The original code's variants are parameters (pipeline.loops.settings.RefineSettings):
the threshold, whether an unscored metric triggers (the original's `if score and score <= 2` let a
failed parse pass), which assessment the regeneration prompt carries, re-judging all metrics or only
the low ones, and reporting the last or the best iteration.
"""

from __future__ import annotations

from statistics import fmean

from pipeline.data.transcripts import Transcript
from pipeline.judges.rubric.assessor import ask, transcript_block
from pipeline.judges.rubric.judge import judge_all
from pipeline.judges.rubric.prompts import (
    ASSESSMENT_SECTION,
    FEEDBACK_ITEM,
    FEEDBACK_ITEM_UNSCORED,
    METRIC_DESCRIPTIONS,
    REFINE_PROMPT,
    SYSTEM_PROMPT,
)
from pipeline.judges.rubric.results import Assessment, MetricJudgement, in_order
from pipeline.judges.rubric.settings import AssessSettings, JudgeSettings
from pipeline.llm.session import LLMSession
from pipeline.llm.types import CallContext, Message, Options
from pipeline.loops.results import Iteration, Refinement
from pipeline.loops.settings import RefineSettings


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
    return REFINE_PROMPT.format(
        transcript=transcript_block(transcript, assess_settings),
        assessment_section=section,
        feedback=feedback_text(last.metrics, last.low_metrics),
    )


def mean_score(metrics: dict[str, MetricJudgement]) -> float:
    scored = [m.score for m in metrics.values() if m.score is not None]
    return fmean(scored) if scored else float("-inf")


def refine(
    session: LLMSession,
    transcript: Transcript,
    initial_assessment: Assessment,
    initial_metrics: dict[str, MetricJudgement],
    settings: RefineSettings,
    assess_settings: AssessSettings,
    judge_settings: JudgeSettings,
    options: Options,
) -> Refinement:
    # Read back from a file, the metrics come sorted by name; the feedback lists them as configured.
    initial_metrics = in_order(initial_metrics, judge_settings.metrics)
    history = [
        Iteration(
            iteration=0,
            assessment=initial_assessment,
            metrics=initial_metrics,
            low_metrics=low_metrics(initial_metrics, settings),
        )
    ]
    if not history[0].low_metrics:
        stop = "passed_initially"
    elif settings.max_iterations == 0:
        stop = "disabled"
    else:
        stop = "max_iterations"
        for number in range(1, settings.max_iterations + 1):
            last = history[-1]
            prompt = regeneration_prompt(transcript, history, settings, assess_settings)
            context = CallContext(stage="refine", item=transcript.item_id, step=number)
            assessment = ask(
                session,
                transcript,
                (Message(role="system", content=SYSTEM_PROMPT), Message(role="user", content=prompt)),
                assess_settings,
                options,
                context.at(role="refine"),
            )
            to_judge = last.low_metrics if settings.rejudge == "low" else tuple(last.metrics)
            metrics = {
                name: judged.model_copy(update={"carried_over": True})
                for name, judged in last.metrics.items()
                if name not in to_judge
            }
            metrics.update(
                judge_all(session, transcript, assessment.text, to_judge, judge_settings, options, context)
            )
            metrics = {name: metrics[name] for name in last.metrics}  # keep the metrics' order
            low = low_metrics(metrics, settings)
            history.append(
                Iteration(
                    iteration=number,
                    assessment=assessment,
                    metrics=metrics,
                    low_metrics=low,
                    regeneration_prompt=prompt,
                )
            )
            if not low:
                stop = "passed"
                break
    kept = len(history) - 1
    if settings.keep == "best":
        # Ties go to the earliest iteration: refinement must earn its place.
        kept = max(range(len(history)), key=lambda i: (mean_score(history[i].metrics), -i))
    return Refinement(item=transcript.item_id, iterations=tuple(history), stop_reason=stop, kept=kept)
