"""What changed between two iterations of one item, as unified diffs of the recorded calls.

An iteration's assessment is its assessor call (role assess at iteration 0, refine after); its
judgement of a metric is the judge call for that metric. Of each, the LAST attempt is compared:
its messages hold the first ask and every re-ask, and its reply is the one the pipeline used.
"""

from __future__ import annotations

import difflib

from pipeline.errors import JudgeloopError
from pipeline.llm.records import RecordedCall
from pipeline.llm.terminal import text_lines

ASSESSMENT_ROLES = ("assess", "refine")


def final_call(
    calls: list[RecordedCall], item: str, iteration: int, roles: tuple[str, ...], metric: str | None
) -> RecordedCall | None:
    found = [
        c
        for c in calls
        if (c.context.item, c.context.step, c.context.label("metric")) == (item, iteration, metric)
        and c.context.label("role") in roles
    ]
    return max(found, key=lambda c: c.context.attempt, default=None)


def judged_at(calls: list[RecordedCall], item: str, iteration: int, metric: str) -> RecordedCall | None:
    """The judge call in effect at `iteration`: with refine.rejudge=low an unjudged metric is carried over."""
    for number in range(iteration, -1, -1):
        call = final_call(calls, item, number, ("judge",), metric)
        if call is not None:
            return call
    return None


def prompt_text(call: RecordedCall) -> str:
    return "".join(f"[{m.role}]\n{m.content}\n" for m in call.record.request.messages)


def unified(title: str, before: str, after: str, names: tuple[str, str], context: int) -> str:
    lines = difflib.unified_diff(
        text_lines(before, keepends=True), text_lines(after, keepends=True), *names, n=context
    )
    body = "".join(line if line.endswith("\n") else line + "\n" for line in lines) or "(no change)\n"
    return f"### {title}\n{body}"


def diff_iterations(
    calls: list[RecordedCall], item: str, first: int, second: int, metric: str | None, context: int = 3
) -> str:
    recorded = sorted(
        {c.context.step for c in calls if c.context.item == item and c.context.step is not None}
    )
    if not recorded:
        raise JudgeloopError(
            f"no recorded call for item '{item}'. Fix: list the items with `judgeloop audit`."
        )
    steps = [("assessment", [final_call(calls, item, i, ASSESSMENT_ROLES, None) for i in (first, second)])]
    if metric is not None:
        steps.append((f"judge {metric}", [judged_at(calls, item, i, metric) for i in (first, second)]))
    out: list[str] = []
    for label, pair in steps:
        found: list[RecordedCall] = []
        for iteration, call in zip((first, second), pair, strict=True):
            if call is None:
                raise JudgeloopError(
                    f"item '{item}' has no recorded {label} call at iteration {iteration} "
                    f"(iterations recorded: {', '.join(str(i) for i in recorded)})."
                )
            if call.context.step != iteration:
                out.append(
                    f"note: {label}: not re-judged at iteration {iteration}, the judgement of "
                    f"iteration {call.context.step} was carried over\n"
                )
            found.append(call)
        before, after = found
        names = [f"{item} iteration {i} {label}" for i in (first, second)]
        out.append(
            unified(
                f"{label} prompt",
                prompt_text(before),
                prompt_text(after),
                (names[0] + " prompt", names[1] + " prompt"),
                context,
            )
        )
        out.append(
            unified(
                f"{label} reply",
                before.record.reply.text + "\n",  # as `judgeloop diff` shows a reply: a line
                after.record.reply.text + "\n",  # break after it, so one added at its end is a line
                (names[0] + " reply", names[1] + " reply"),
                context,
            )
        )
    return "\n".join(out)
