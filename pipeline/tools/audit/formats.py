"""How `judgeloop audit` shows a call (pipeline.tools.audit.command): as text, markdown or a JSON
line, every request message as it was sent and the reply as it came back, with the score its
stage read from it (the reading its design owns, Design.reads)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Literal

from pipeline.experiments.design import load_ref
from pipeline.experiments.params import Params
from pipeline.experiments.registry import designs
from pipeline.judges.call_reading import CallReader, CallReading
from pipeline.llm.keys import canonical_json
from pipeline.llm.records import RecordedCall
from pipeline.llm.terminal import framed, shown, spelled
from pipeline.reports.markdown import code_cell, table_cell
from pipeline.tools.audit.calls import Marks
from pipeline.tools.audit.filters import last_run_status
from pipeline.tools.inventory import RunSummary

__all__ = ["Format", "Readers", "as_json", "format_markdown", "format_text", "readers", "render", "score_of"]

Format = Literal["text", "jsonl", "markdown"]
# stage name -> its design's reader: (call context, call record) -> the reading its stage made, or None
Readers = dict[str, CallReader]


def readers(params: Params | None) -> Readers:
    """Each design's reader (Design.reads) for the stages of that design, bound to params.yaml's
    settings (None: the designs' defaults)."""
    found: Readers = {}
    for design in designs():
        if design.reads is not None:
            read = load_ref(design.reads)(params)
            found.update((stage.name, read) for stage in design.stages)
    return found


def score_of(call: RecordedCall, read: Readers | None) -> CallReading | None:
    """The score the call's stage read from its reply, as its design reads it; None for a call that
    no design reads for a score."""
    reader = (read or {}).get(call.context.stage)
    return None if reader is None else reader(call.context, call.record)


def _options(call: RecordedCall) -> str:
    dumped = call.record.request.options.model_dump(mode="json")
    return " ".join(f"{k}={spelled(v)}" for k, v in dumped.items() if k != "stop" or v)


def _header(
    call: RecordedCall, runs: dict[str, RunSummary], marks: Marks | None = None
) -> list[tuple[str, str]]:
    record, reply = call.record, call.record.reply
    rows = [
        ("key", record.key),
        ("model", f"{record.model.backend} {record.model.name} ({record.model.digest})"),
        ("created_at", record.created_at),
        ("tokens", f"prompt {reply.prompt_tokens}, completion {reply.completion_tokens}"),
        ("done_reason", str(reply.done_reason)),
        *([("refused", reply.too_long)] if reply.too_long is not None else []),
        ("options", _options(call)),
    ]
    if record.request.format is not None:
        rows.append(("format", canonical_json(record.request.format)))
    if call.context.stage in runs:
        rows.append(("last run", last_run_status(runs, call) or "not part of the last run"))
    problem = record.problem() or (marks.get(id(call)) if marks is not None else None)
    rows.append(("record", "verifies" if problem is None else f"UNTRUSTED: {problem}"))
    return rows


def _score_line(reading: CallReading, body: Callable[[str], str] = shown) -> str:
    matched = f' from "{body(reading.matched)}"' if reading.matched else ""
    # What the reply states even when it is no score ("Score: 3.5/5" on 1-5 is non_integer, states 3.5).
    stated = f", states {reading.stated}" if reading.score is None and reading.stated is not None else ""
    # A structured reply: the fields read, each with G-Eval's weighted score where it has one; a
    # failure: what was wrong.
    fields = [
        f"{name} {body(value) if isinstance(value, str) else value}"
        + (f" (weighted {reading.weighted[name]})" if name in reading.weighted else "")
        for name, value in reading.fields.items()
    ]
    fields += [f"weighted {w}" for name, w in reading.weighted.items() if name not in reading.fields]
    read = f"; {', '.join(fields)}" if fields else ""
    error = f": {body(reading.error)}" if reading.error else ""
    score = "none" if reading.score is None else reading.score
    return f"{score} ({reading.reason}{stated}{matched}{error}{read})"


def _as_recorded(text: str) -> str:
    return text


def format_text(
    call: RecordedCall,
    runs: dict[str, RunSummary],
    marks: Marks | None = None,
    read: Readers | None = None,
    raw: bool = False,
) -> str:
    """A call as text: its header's values on one line each, its messages and reply shown as
    themselves (pipeline.llm.terminal.shown), or as recorded where `raw`."""
    body = _as_recorded if raw else shown
    lines = [f"=== {shown(call.context.describe(), one_line=True)} ==="]
    lines += [f"{name:<12}{shown(value, one_line=True)}" for name, value in _header(call, runs, marks)]
    # Each text behind a margin: no line of a prompt or reply can pass for a header (`===`, `---`).
    for number, message in enumerate(call.record.request.messages, start=1):
        lines += [f"--- message {number} ({message.role}) ---", framed(body(message.content))]
    lines += ["--- reply ---", framed(body(call.record.reply.text))]
    reading = score_of(call, read)
    if reading is not None:
        lines.append(f"--- score: {_score_line(reading, body)} ---")
    return "\n".join(lines) + "\n"


def as_json(
    call: RecordedCall, runs: dict[str, RunSummary], marks: Marks | None = None, read: Readers | None = None
) -> dict[str, Any]:
    record = call.record
    reading = score_of(call, read)
    return {
        "context": call.context.model_dump(mode="json"),
        "key": record.key,
        "model": record.model.model_dump(mode="json"),
        "created_at": record.created_at,
        "request": record.request.model_dump(mode="json"),
        "reply": record.reply.model_dump(mode="json"),
        "score": None if reading is None else reading.as_json(),
        "last_run": last_run_status(runs, call),
        "problem": record.problem() or (marks.get(id(call)) if marks is not None else None),
    }


def _fenced(text: str, info: str = "text") -> str:
    # A fence longer than any backtick run inside, so a reply that itself holds ``` stays one block.
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def format_markdown(
    call: RecordedCall,
    runs: dict[str, RunSummary],
    marks: Marks | None = None,
    read: Readers | None = None,
    raw: bool = False,
) -> str:
    body = _as_recorded if raw else shown
    # The heading and the score line are Markdown of their own (not a code span or a fence): their
    # texts escaped as a table's cell is, so that a rendered page halves no shown backslash.
    parts = [f"### {table_cell(call.context.describe())}", "", "| | |", "|---|---|"]
    parts += [f"| {name} | {code_cell(value)} |" for name, value in _header(call, runs, marks)]
    for number, message in enumerate(call.record.request.messages, start=1):
        parts += ["", f"**message {number} ({message.role})**", "", _fenced(body(message.content))]
    parts += ["", "**reply**", "", _fenced(body(call.record.reply.text))]
    reading = score_of(call, read)
    if reading is not None:
        parts += ["", f"**score**: {_score_line(reading, _as_recorded if raw else table_cell)}"]
    return "\n".join(parts) + "\n"


def render(
    calls: list[RecordedCall],
    fmt: Format,
    runs: dict[str, RunSummary],
    marks: Marks | None = None,
    read: Readers | None = None,
    raw: bool = False,
) -> str:
    if fmt == "jsonl":
        return "".join(canonical_json(as_json(c, runs, marks, read)) + "\n" for c in calls)
    one = format_markdown if fmt == "markdown" else format_text
    return "\n".join(one(c, runs, marks, read, raw) for c in calls)
