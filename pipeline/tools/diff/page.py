"""`judgeloop diff --html DIR`: the diff as one offline page, DIR/index.html.

The report pages' frame (the same stylesheet, script and Content-Security-Policy: nothing loads
from the network), a table per design and metric, the judgements that flipped, and every changed
judgement opening its two calls side by side, the lines that differ between them marked (a line
only in A as removed, only in B as added). Autoescaped: every prompt and reply is text on the page.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from markupsafe import Markup

from pipeline.experiments.judgements import Judgement
from pipeline.llm.files import atomic_write
from pipeline.llm.records import RecordedCall
from pipeline.llm.terminal import text_lines
from pipeline.reports.frame import asset, content_security_policy
from pipeline.reports.templating import make_environment
from pipeline.tools.diff.causes import CAUSES
from pipeline.tools.diff.summary import Change, MetricDiff, RoundDiff
from pipeline.tools.diff.text import (
    interval,
    noise_lines,
    number,
    prompt_text,
    replies_text,
    replies_title,
    round_title,
    test_line,
    verdict,
)

TEMPLATES = Path(__file__).resolve().parent / "templates"
TITLE = "judgeloop diff"
# The page's own rules, after the shared stylesheet (style-src allows inline styles).
STYLE = """
.sides{display:grid;grid-template-columns:1fr 1fr;gap:12px}.side{min-width:0}
pre.lines span{display:block;min-height:1.2em}pre.lines span.removed{background:#fbe3e0}
pre.lines span.added{background:#dff3e4}details.change{border:1px solid var(--line);border-radius:5px;
padding:4px 12px;margin:6px 0}details.change[open]{background:#fcfcfd}
"""
Calls = tuple[Mapping[str, RecordedCall], Mapping[str, RecordedCall]]


def _marked(before: str, after: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Each side's lines with a class: "" where both have it, "removed" only in A, "added" only in B."""
    old, new = text_lines(before), text_lines(after)
    left: list[tuple[str, str]] = []
    right: list[tuple[str, str]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        same = tag == "equal"
        left += [("" if same else "removed", line) for line in old[i1:i2]]
        right += [("" if same else "added", line) for line in new[j1:j2]]
    return left, right


def _anchor(*parts: object) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "-", "-".join(str(p) for p in parts))


def _call(judgement: Judgement, calls: Mapping[str, RecordedCall]) -> RecordedCall | None:
    """The judgement's first call: the question as first put."""
    return calls.get(judgement.keys[0]) if judgement.keys else None


def _change(change: Change, calls: Calls) -> dict[str, Any]:
    a, b = change.a, change.b
    prompts = _marked(prompt_text(_call(a, calls[0])), prompt_text(_call(b, calls[1])))
    replies = _marked(replies_text(a, calls[0]), replies_text(b, calls[1]))
    sides = [
        {
            "name": name,
            "verdict": verdict(j),
            "call_keys": ", ".join(j.keys) or "no call named",
            "prompt": prompts[i],
            "reply": replies[i],
        }
        for i, (name, j) in enumerate((("A", a), ("B", b)))
    ]
    return {
        "id": _anchor(a.design, a.metric, a.item, a.iteration),
        "item": a.item,
        "iteration": a.iteration,
        "a": verdict(a),
        "b": verdict(b),
        "cause": change.cause.kind,
        "detail": change.cause.text.removeprefix(f"{change.cause.kind}: "),
        "flip": change.flip,
        "sides": sides,
        "replies_title": replies_title(a, b),
    }


def _round(part: RoundDiff) -> dict[str, Any]:
    """A round's row: which round and its input, the mean, the tests, the change against the noise."""
    tests = [
        test_line(t, what, adjusted)
        for t, what, adjusted in (
            (part.score_test, "the scores", part.score_holm),
            (part.pass_test, "pass/fail", part.pass_holm),
        )
        if t is not None
    ]
    return {
        "title": round_title(part),
        "mean": interval(part.mean).removeprefix("mean B−A ") if part.scored else "—",
        "tests": "; ".join(tests) or "—",
        "noise": " ".join(" ".join(noise_lines(part)).split()) if part.scored and part.changed else "—",
        "agreement": number(part.agreement),
        "kappa": number(part.kappa),
    }


def _metric(row: MetricDiff, changes: Sequence[Change], calls: Calls) -> dict[str, Any]:
    mine = [_change(c, calls) for c in changes if (c.a.design, c.a.metric) == (row.design, row.metric)]
    return {
        "id": _anchor(row.design, row.metric),
        "design": row.design,
        "metric": row.metric,
        "paired": row.paired,
        "changed": row.changed,
        "pass_to_fail": row.pass_to_fail,
        "fail_to_pass": row.fail_to_pass,
        "only_a": row.only_a,
        "only_b": row.only_b,
        "rounds": [_round(part) for part in row.rounds],
        "causes": [(kind, row.causes[kind]) for kind in CAUSES if row.causes[kind]],
        "flipped": [c for c in mine if c["flip"]],
        "changes": mine,
    }


def render_page(
    names: Sequence[str],
    rows: Sequence[MetricDiff],
    changes: Sequence[Change],
    calls: Calls,
    notes: Sequence[str] = (),
) -> str:
    """The page; `notes`: what the text says above its metrics (a run without its recordings, what
    the tests take as their unit)."""
    script = asset("report.js")
    page = {
        "csp": content_security_policy(script),
        "style": Markup(asset("report.css") + STYLE),
        "script": Markup(script),
        "title": f"{TITLE}: {names[0]} → {names[1]}",
        "home": None,
    }
    template = make_environment(TEMPLATES).get_template("diff.html.j2")
    return template.render(
        **page,
        names=names,
        total=sum(r.paired for r in rows),
        changes=changes,
        notes=notes,
        metrics=[_metric(row, changes, calls) for row in rows],
    )


def write_page(
    folder: Path,
    names: Sequence[str],
    rows: Sequence[MetricDiff],
    changes: Sequence[Change],
    calls: Calls,
    notes: Sequence[str] = (),
) -> Path:
    # Its write makes the folder (files.folder_to_write refuses a link out of the project, but for
    # one under .judgeloop, the local state, which may lie anywhere: `--html .judgeloop/diff`).
    page = folder / "index.html"
    atomic_write(
        page, render_page(names, rows, changes, calls, notes)
    )  # never written through a link at its name
    return page
