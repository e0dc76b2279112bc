"""Why a judgement changed between two runs, read from the two runs' recorded judge calls.

In the order they are tried, the first that holds:
    input     the two judged different inputs (the design's upstream ids differ: the assessment,
              the answer, ... that the judge read changed upstream)
    prompt    the judge was asked something else: the first message that differs is named, with a
              count of the lines added and removed (or the reply format, when only the schema moved)
    model     the same question, another model (its name or weights' digest)
    sampling  the same question and model, other sampling options (temperature, seed, ...)
    samples   judged from another number of samples (judge.samples), the score their combination
    reply     the same request to the same model, another reply (a nondeterministic backend, or a
              live rerun on other hardware)
    reading   the same calls, read differently (the score parser or its params)
    threshold the same score, another verdict (the pass threshold moved)
    unrecorded  a call the judgement names is missing from its run's recordings
The question compared is each judgement's first call (what was asked before any re-ask); the
replies are all its calls' (each sample's, each re-ask's). Input, prompt, model, sampling and
samples can move together (a second run at another temperature with three samples): the first is
the cause, the others are named beside it (`also`), so that none is hidden. A changed input implies
a changed prompt (the judge is shown it), which is therefore not named again.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass

from pipeline.experiments.judgements import Judgement
from pipeline.llm.records import RecordedCall
from pipeline.llm.terminal import text_lines

CAUSES = ("input", "prompt", "model", "sampling", "samples", "reply", "reading", "threshold", "unrecorded")


@dataclass(frozen=True)
class Cause:
    kind: str  # one of CAUSES
    detail: str  # what moved, in a few words
    also: tuple[str, ...] = ()  # the other causes that hold too, in CAUSES' order

    @property
    def text(self) -> str:
        """`kind: detail`, and what else moved: as the terminal and the page show it."""
        also = f" (also: {', '.join(self.also)})" if self.also else ""
        return f"{self.kind}: {self.detail}{also}"


def _line_counts(before: str, after: str) -> tuple[int, int]:
    """The lines added and removed as the views show the message (pipeline.tools.diff.text's
    prompt_text, a line break after each): a line break added at its end is a line added."""
    added = removed = 0
    for line in difflib.ndiff(text_lines(before + "\n"), text_lines(after + "\n")):
        added += line.startswith("+ ")
        removed += line.startswith("- ")
    return added, removed


def prompt_change(a: RecordedCall, b: RecordedCall) -> str | None:
    """Which message of the question differs, and by how many lines; None: the same question."""
    old, new = a.record.request.messages, b.record.request.messages
    for index, (x, y) in enumerate(zip(old, new, strict=False)):
        if x != y:
            added, removed = _line_counts(x.content, y.content)
            role = x.role if x.role == y.role else f"{x.role} → {y.role}"
            return f"message {index + 1} ({role}): +{added} −{removed} lines"
    if len(old) != len(new):
        return f"{len(old)} → {len(new)} messages"
    if a.record.request.format != b.record.request.format:
        return "the reply format (schema) changed"
    if a.record.request.logprobs != b.record.request.logprobs:
        return f"log-probabilities asked: {a.record.request.logprobs} → {b.record.request.logprobs}"
    return None


def _model(call: RecordedCall) -> str:
    model = call.record.model
    return f"{model.backend}:{model.name}" + (f"@{model.digest[:19]}" if model.digest else "")


def options_change(a: RecordedCall, b: RecordedCall) -> str | None:
    old = a.record.request.options.model_dump()
    new = b.record.request.options.model_dump()
    moved = [f"{name} {old[name]} → {new[name]}" for name in old if old[name] != new[name]]
    return ", ".join(moved) or None


def _calls(judgement: Judgement, calls: Mapping[str, RecordedCall]) -> tuple[RecordedCall, ...] | None:
    """The judgement's calls in the order asked; None where it names none, or one is not recorded."""
    if not judgement.keys or any(key not in calls for key in judgement.keys):
        return None
    return tuple(calls[key] for key in judgement.keys)


def _of_question(first_a: RecordedCall, first_b: RecordedCall) -> list[Cause]:
    """What differs in the question first put: its prompt, the model, the sampling options."""
    held = []
    prompt = prompt_change(first_a, first_b)
    if prompt is not None:
        held.append(Cause("prompt", prompt))
    if first_a.record.model != first_b.record.model:
        held.append(Cause("model", f"{_model(first_a)} → {_model(first_b)}"))
    options = options_change(first_a, first_b)
    if options is not None:
        held.append(Cause("sampling", options))
    return held


def _held(
    a: Judgement, b: Judgement, found: tuple[tuple[RecordedCall, ...] | None, tuple[RecordedCall, ...] | None]
) -> list[Cause]:
    """Every cause of input, prompt, model, sampling and samples that holds, in that order."""
    held = []
    if a.upstream is not None and b.upstream is not None and a.upstream != b.upstream:
        held.append(Cause("input", f"{a.upstream[7:15]} → {b.upstream[7:15]}"))
    if found[0] is not None and found[1] is not None:
        held += [c for c in _of_question(found[0][0], found[1][0]) if not (held and c.kind == "prompt")]
    if len(a.samples) != len(b.samples):
        counts = [len(j.samples) or 1 for j in (a, b)]
        held.append(Cause("samples", f"{counts[0]} → {counts[1]} samples per judgement, combined"))
    return held


def _reply_detail(first: tuple[RecordedCall, RecordedCall] | None) -> str:
    """The same request answered otherwise; where the two runs recorded two answers to one key
    (each run's cache served its own), when each was made, so the older is told from the newer."""
    if first is None:
        return "the same request to the same model, re-asked another number of times"
    a, b = first
    if a.record.key == b.record.key:
        return f"one request, two recorded answers (made {a.record.created_at} and {b.record.created_at})"
    return "the same request to the same model replied otherwise"


def cause_of(
    a: Judgement, b: Judgement, calls_a: Mapping[str, RecordedCall], calls_b: Mapping[str, RecordedCall]
) -> Cause:
    """Why judgement `a` (run A) became `b` (run B); both are of the same pair key and differ."""
    found_a, found_b = _calls(a, calls_a), _calls(b, calls_b)
    held = _held(a, b, (found_a, found_b))
    if held:
        # A call missing: the prompt, model and sampling could not be compared, which is said.
        unread = ("unrecorded",) if found_a is None or found_b is None else ()
        return Cause(held[0].kind, held[0].detail, tuple(c.kind for c in held[1:]) + unread)
    if found_a is None or found_b is None:
        side = "A" if found_a is None else "B"
        return Cause("unrecorded", f"run {side}'s judge call is not in its recordings")
    changed = [
        (x, y) for x, y in zip(found_a, found_b, strict=False) if x.record.reply.text != y.record.reply.text
    ]
    if changed or len(found_a) != len(found_b):
        return Cause("reply", _reply_detail(changed[0] if changed else None))
    if a.score != b.score:
        return Cause("reading", "the same reply, read as another score (parser or its params)")
    return Cause("threshold", "the same score, another verdict (the pass threshold)")
