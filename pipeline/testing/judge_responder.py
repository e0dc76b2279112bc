"""A responder that plays both the assessor and the judge, for end-to-end tests and benchmarks.

Deterministic in the request (same prompt, same reply), it writes assessments in the XML format,
scores them in the requested format, and improves when it is given feedback, so the feedback loop
has something to do: first assessments score low on some metrics, regenerated ones pass. Every
seventh judge reply forgets the score, so the re-ask path runs too.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

_METRIC = re.compile(r"assessment output for (\w+) only", re.I)


def _number(*parts: str) -> int:
    return int(hashlib.sha256("|".join(parts).encode()).hexdigest()[:8], 16)


def _assessment(prompt: str, refined: bool) -> str:
    quote = next((line for line in prompt.splitlines() if line.lower().startswith("participant")), "")
    quote = quote.split(":", 1)[-1].strip()[:80]
    note = " Revised after feedback: frequency and duration added." if refined else ""
    return (
        f"<assessment>The participant describes their mood and routine.{note}\n"
        f'<exact_quotes>"{quote}"</exact_quotes></assessment>\n'
        "<PHQ8_symptoms>Sleep: several days. Energy: several days.</PHQ8_symptoms>\n"
        "<social_factors>Lives with family.</social_factors>\n"
        "<biological_factors>not assessed in interview</biological_factors>\n"
        "<risk_factors>None reported.</risk_factors>"
    )


def experiment_responder(request: dict[str, Any]) -> str:
    messages = request["messages"]
    first = next(m["content"] for m in messages if m["role"] == "user")
    last = messages[-1]["content"]
    metric = _METRIC.search(first)
    if metric is None:
        return _assessment(first, refined="EVALUATION FEEDBACK" in first)
    name = metric.group(1).lower()
    seed = _number(name, first)
    if "did not contain a score" in last:
        return f"Explanation: as above.\nScore: {2 + seed % 4}"
    if seed % 7 == 0:
        return "Explanation: the assessment is reasonable but I will not commit to a number."
    score = 4 + seed % 2 if "Revised after feedback" in first else 2 + seed % 4
    return f"Explanation: {name} judged against the transcript; {5 - score} mistake(s).\nScore: {score}"
