"""Why judgements came back unscored, said where the user looks first: the stage's end line.

A judge that answers on another scale (1-10 on a 1-5 rubric) or in another format leaves every
judgement unscored; the reasons (pipeline.judges.scores' UnreadReason, a JSON failure kind, or
too_long) were only in metrics.json and audit. `unscored_reasons` names the most frequent ones with
a hint at the likely cause, e.g. "the judge may be answering on another scale: 12 out_of_range,
8 scale_mismatch".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

ANOTHER_SCALE = "the judge may be answering on another scale"
HINTS = {
    "out_of_range": ANOTHER_SCALE,
    "scale_mismatch": ANOTHER_SCALE,
    "non_integer": "the judge may be giving decimals on an integer scale",
    "no_score": "the judge may not be writing a score where the prompt asks (a chat model may need "
    "judge.output=text)",
    "empty": "the judge's replies are empty (a token budget too small, or a server that failed)",
    "template_echo": "the judge may be repeating the prompt's template instead of answering",
    "ambiguous": "the judge's replies state more than one score",
    "too_long": "the prompts are longer than the model's context",
}
GENERIC_HINT = "read the replies with `judgeloop audit --stage STAGE`"


def reason_counts(reasons: Iterable[str], top: int = 3) -> list[tuple[str, int]]:
    """The `top` most frequent reasons, most first (ties by name)."""
    counts = Counter(reasons)
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]


def unscored_reasons(reasons: Iterable[str], top: int = 3) -> str:
    """'HINT: N reason, M reason' for the top reasons, or '' when there are none."""
    ranked = reason_counts(reasons, top)
    if not ranked:
        return ""
    hint = HINTS.get(ranked[0][0], GENERIC_HINT)
    return f"{hint}: " + ", ".join(f"{count} {reason}" for reason, count in ranked)
