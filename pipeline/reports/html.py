"""One self-contained HTML file for a reviewer: Figure 2, then every item's iterations down to the
exact prompts and replies, so each number in the report can be traced to the text it came from.

Everything that came from a transcript or a model is escaped: the text is untrusted (a demo
transcript tries to instruct the judge) and must reach the reviewer as text, never as markup. The
file needs no network, and the same inputs give the same bytes: no "generated at" timestamps.
Prompts repeat the transcript, so the transcript is also shown once per item and long messages are
collapsed; they are still written out in full, because auditability matters more than size.
"""

from __future__ import annotations

import base64
import hashlib
import re
from html import escape
from pathlib import Path
from typing import Any

from pipeline.experiments.paper.aggregation import PAPER_FIGURE2
from pipeline.judges.rubric.judge import SCALE, judge_prompt
from pipeline.judges.rubric.judge_prompts import JUDGE_PROMPTS
from pipeline.judges.rubric.results import MetricJudgement
from pipeline.judges.scores import extract_score
from pipeline.llm.recordings import read_all
from pipeline.llm.records import CallRecord
from pipeline.llm.types import Message
from pipeline.loops.feedback import feedback_text
from pipeline.loops.results import Iteration, Refinement
from pipeline.reports.svg import STYLE, figure2_svg, sparkline_svg

STOP_REASONS = {
    "passed_initially": "every metric passed at iteration 0; not refined",
    "passed": "refined until every metric passed",
    "max_iterations": "still low after the last allowed iteration",
    "disabled": "refinement disabled (max_iterations: 0)",
}
READINGS = {
    "labelled": "a labelled verdict (“Score: N”)",
    "json": "a score field in a JSON object",
    "bracketed": "a bracketed verdict ([[N]])",
    "phrase": "a verdict sentence (“I would rate it N”)",
    "bare_number": "the reply was only a number",
    "empty": "the reply was empty",
    "no_score": "no readable score",
    "template_echo": "the prompt's score template echoed back",
    "ambiguous": "a range or a choice, not one score",
    "out_of_range": "a number outside 1–5",
    "scale_mismatch": "a score on another scale (e.g. 4/10)",
    "non_integer": "not a whole number",
}
# Longer messages are collapsed behind their first line; shorter ones (a re-ask reminder) are shown.
_SHOWN_CHARS, _SHOWN_LINES = 320, 6

JS = """
document.documentElement.classList.add("js");
function openTo(id){
  for(var n=document.getElementById(id);n;n=n.parentElement){if(n.tagName==="DETAILS")n.open=true;}}
function onHash(){if(location.hash.length>1)openTo(decodeURIComponent(location.hash.slice(1)));}
window.addEventListener("hashchange",onHash);onHash();
document.querySelectorAll("section.item .tools").forEach(function(tools){
  [["open all iterations",true],["close all",false]].forEach(function(spec){
    var b=document.createElement("button");b.type="button";b.textContent=spec[0];
    b.addEventListener("click",function(){tools.parentElement.querySelectorAll("details.iteration")
      .forEach(function(d){d.open=spec[1];});});tools.appendChild(b);});});
"""

# Defence in depth behind the escaping: only this file's own script may run, and nothing may load.
CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    f"script-src 'sha256-{base64.b64encode(hashlib.sha256(JS.encode()).digest()).decode()}'"
)


def e(value: object) -> str:
    return escape(str(value), quote=True)


def load_records(root: Path) -> dict[str, CallRecord]:
    """Every recorded call under `root` (e.g. recordings/), by key, checksums verified."""
    return {loaded.call.record.key: loaded.call.record for loaded in read_all(root)}


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-") or "x"


def _mean(metrics: dict[str, MetricJudgement]) -> str:
    scored = [m.score for m in metrics.values() if m.score is not None]
    return f"{sum(scored) / len(scored):.2f}" if scored else "—"


def _stats(stats: dict[str, Any]) -> str:
    if stats["mean"] is None:
        return f"— (n=0, {stats['unscored']} unscored)"
    sd = "—" if stats["sd"] is None else f"{stats['sd']:.2f}"
    return f"{stats['mean']:.2f} ± {sd} (n={stats['n']}, {stats['unscored']} unscored)"


def _referenced(refinements: list[Refinement]) -> list[str]:
    return list(
        dict.fromkeys(
            key
            for r in refinements
            for it in r.iterations
            for key in (*it.assessment.call_keys, *(k for m in it.metrics.values() for k in m.call_keys))
        )
    )


def _header(refinements: list[Refinement], summary: dict[str, Any], records: dict[str, CallRecord]) -> str:
    keys = _referenced(refinements)
    used = [records[k].model for k in keys if k in records]
    models = dict.fromkeys(f"{m.backend}:{m.name} ({m.digest})" for m in used)
    unscored = {p: sum(m[p]["unscored"] for m in summary["figure2"].values()) for p in ("before", "after")}
    invalid = summary["invalid_assessments"]
    facts = {
        "Model": ", ".join(models) or "unknown (no call recorded)",
        "Items": summary["items"],
        "Refined items": summary["refined_items"],
        "Mean iterations (refined items)": summary["mean_iterations"],
        "Stop reasons": ", ".join(f"{k}: {v}" for k, v in summary["stop_reasons"].items()) or "—",
        "Unscored judgements": f"{unscored['before']} before, {unscored['after']} after",
        "Invalid assessments": f"{invalid['initial']} initially, {invalid['kept']} among those kept",
        "LLM calls": ", ".join(f"{k}: {v}" for k, v in summary["calls"].items()) or "—",
        "Calls not recorded": f"{sum(k not in records for k in keys)} of {len(keys)}",
    }
    items = "".join(f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in facts.items())
    return f'<dl class="facts">{items}</dl>'


def _figure2(summary: dict[str, Any]) -> str:
    rows = []
    for metric, phases in summary["figure2"].items():
        paper = PAPER_FIGURE2.get(metric)
        cells = [_stats(phases["before"]), _stats(phases["after"])]
        cells += [f"{m:.2f} ± {s:.2f}" for m, s in paper] if paper else ["—", "—"]
        rows.append(f"<tr><th>{e(metric)}</th>" + "".join(f"<td>{e(c)}</td>" for c in cells) + "</tr>")
    head = "".join(
        f"<th>{h}</th>" for h in ("metric", "ours before", "ours after", "paper before", "paper after")
    )
    return (
        '<section id="figure2"><h2>Judge scores before and after the feedback loop '
        f"(the paper's Figure 2)</h2><table><tr>{head}</tr>{''.join(rows)}</table>"
        + figure2_svg(summary["figure2"], PAPER_FIGURE2)
        + '<p class="note">Mean ± sample SD over scored replies; unscored replies are counted, never '
        "averaged in. The paper's numbers are 142 DAIC-WOZ participants judged by Gemma 3 27B: compare "
        "the shape, not the values.</p></section>"
    )


def _nav(refinements: list[Refinement], anchors: list[str]) -> str:
    rows = "".join(
        f'<tr><td><a href="#{a}">{e(r.item)}</a></td><td class="num">{len(r.iterations) - 1}</td>'
        f'<td>{e(r.stop_reason)}</td><td class="num">{r.kept}</td><td class="num">'
        f"{_mean(r.iterations[0].metrics)} → {_mean(r.iterations[r.kept].metrics)}</td></tr>"
        for r, a in zip(refinements, anchors, strict=True)
    )
    head = "".join(
        f"<th>{h}</th>" for h in ("item", "refinements", "stop reason", "kept", "mean before → after")
    )
    return f"<nav><h2>Items</h2><table><tr>{head}</tr>{rows}</table></nav>"


def _transcript(r: Refinement, records: dict[str, CallRecord]) -> str | None:
    """The transcript, cut out of a recorded judge prompt by its template and checked by rebuilding it.

    The results do not carry the transcript and the aggregate stage does not read the data; the
    judge prompt holds it verbatim between two fixed template parts, so it can be recovered exactly.
    """
    for it in r.iterations:
        for metric, judged in it.metrics.items():
            record = records.get(judged.call_keys[0]) if judged.call_keys else None
            if judged.carried_over or record is None or metric not in JUDGE_PROMPTS:
                continue
            prompt, assessment = record.request.messages[0].content, it.assessment.text
            head, _, rest = JUDGE_PROMPTS[metric].partition("{transcript}")
            tail = rest.replace("{qualitative_output}", assessment)
            if prompt.startswith(head) and prompt.endswith(tail) and len(prompt) >= len(head) + len(tail):
                candidate = prompt[len(head) : len(prompt) - len(tail)]
                if judge_prompt(metric, candidate, assessment) == prompt:
                    return candidate
    return None


def _cell(it: Iteration, metric: str, anchor: str) -> str:
    judged = it.metrics.get(metric)
    if judged is None:
        return "<td>—</td>"
    carried = judged.carried_over
    flags = {"low": metric in it.low_metrics, "unscored": judged.score is None, "carried": carried}
    text = ("—" if judged.score is None else str(judged.score)) + " ↺" * carried
    title = f"{metric} at iteration {it.iteration}: {judged.reading}" + ", carried over" * carried
    return (
        f'<td class="num {" ".join(k for k, on in flags.items() if on)}" title="{e(title)}">'
        f'<a href="#{anchor}-iter-{it.iteration}-{_slug(metric)}">{e(text)}</a></td>'
    )


def _trajectory(r: Refinement, anchor: str) -> str:
    metrics = list(r.iterations[0].metrics)
    rows = [
        f"<tr{' class=kept' * (it.iteration == r.kept)}><th>{it.iteration}</th>"
        + "".join(_cell(it, m, anchor) for m in metrics)
        + f"<td>{'valid' if it.assessment.valid else 'invalid'}</td>"
        f"<td>{e(', '.join(it.low_metrics) or '—')}</td></tr>"
        for it in r.iterations
    ]
    series = {m: [getattr(it.metrics.get(m), "score", None) for it in r.iterations] for m in metrics}
    sparks = "".join(f"<td>{sparkline_svg(scores, r.kept, m)}</td>" for m, scores in series.items())
    head = "".join(f"<th>{e(m)}</th>" for m in metrics)
    return (
        f"<table><tr><th>iteration</th>{head}<th>assessment</th><th>low (sent back)</th></tr>{''.join(rows)}"
        f'<tr><th>trend</th>{sparks}<td colspan="2" class="note">1–5 scale; ring = kept; ↺ = carried over, '
        "not re-judged; shaded = low or unscored</td></tr></table>"
    )


def _message(m: Message, ident: str) -> str:
    role = f'<span class="role {e(m.role)}">{e(m.role)}</span>'
    body = f'<pre id="{ident}">{e(m.content)}</pre>'
    if len(m.content) <= _SHOWN_CHARS and m.content.count("\n") < _SHOWN_LINES:
        return f'<div class="msg">{role}{body}</div>'
    first = next((line for line in m.content.splitlines() if line.strip()), "")
    first = first if len(first) <= 90 else first[:90] + "…"
    size = f"{len(m.content):,} characters, {m.content.count(chr(10)) + 1} lines: "
    summary = f'<summary>{role}{size}<span class="muted">{e(first)}</span></summary>'
    return f'<details class="msg">{summary}{body}</details>'


def _call(key: str, records: dict[str, CallRecord], ident: str, label: str, judge: bool) -> str:
    record = records.get(key)
    if record is None:
        return (
            f'<div class="call missing" id="{ident}"><strong>{e(label)}</strong><p class="missing-text">'
            f'call not recorded: <code>{e(key)}</code></p><p class="note">Its prompt and reply are not in '
            "the recordings given to the report.</p></div>"
        )
    reading = ""
    if judge:
        # Read again with today's extractor: a reviewer sees what each attempt yielded, re-asks included.
        read = extract_score(record.reply.text, SCALE)
        how = "no score" if read.score is None else f"score {read.score}"
        span = f" from “{read.matched}”" if read.matched else ""
        reading = f' → <strong>{e(how)}</strong> <span class="muted">({e(read.reason)}{e(span)})</span>'
    options = " ".join(f"{k}={v}" for k, v in record.request.options.model_dump(mode="json").items())
    messages = "".join(_message(m, f"{ident}-msg-{i}") for i, m in enumerate(record.request.messages))
    return (
        f'<div class="call" id="{ident}"><strong>{e(label)}</strong>{reading}<div class="note">key '
        f"<code>{e(record.key)}</code> · {e(record.model.backend)}:{e(record.model.name)} · answered "
        f'{e(record.created_at)}<br>{e(options)}</div>{messages}<div class="msg"><span class="role reply">'
        f'reply</span><pre class="reply" id="{ident}-reply">{e(record.reply.text)}</pre></div></div>'
    )


def _calls(keys: tuple[str, ...], records: dict[str, CallRecord], ident: str, what: str, judge: bool) -> str:
    return "".join(
        _call(k, records, f"{ident}-{i}", f"{what}: call {i + 1}" + " (re-ask)" * (i > 0), judge)
        for i, k in enumerate(keys)
    )


def _as_recorded(keys: tuple[str, ...], records: dict[str, CallRecord], what: str, text: str) -> str:
    # Without the last call's record the text would be nowhere on the page; the results file has it.
    if keys and keys[-1] in records:
        return ""
    return f'<p class="note">The {what} as the results record it:</p><pre class="reply">{e(text)}</pre>'


def _judgement(r: Refinement, it: Iteration, metric: str, records: dict[str, CallRecord], anchor: str) -> str:
    judged, ident = it.metrics[metric], f"{anchor}-iter-{it.iteration}-{_slug(metric)}"
    score = "unscored" if judged.score is None else f"{judged.score}/5"
    how = READINGS.get(judged.reading, judged.reading)
    how = f"unscored: {how}" if judged.score is None else f"read from {how}"
    badge = "badge bad" if metric in it.low_metrics else "badge"
    head = (
        f'<div class="metric" id="{ident}"><strong>{e(metric)}</strong> '
        f'<span class="{badge}">{e(score)}</span> <span class="muted">{e(how)}</span>'
    )
    if judged.carried_over:
        judged_at = [j for j, past in enumerate(r.iterations[: it.iteration]) if metric in past.metrics]
        source = next((j for j in reversed(judged_at) if not r.iterations[j].metrics[metric].carried_over), 0)
        return (
            f'{head} <span class="badge">↺ carried over</span><p class="note">Not re-judged at this '
            f'iteration; the score and its calls are those of <a href="#{anchor}-iter-{source}-'
            f'{_slug(metric)}">iteration {source}</a>.</p></div>'
        )
    calls = _calls(judged.call_keys, records, ident, metric, True)
    recorded = _as_recorded(judged.call_keys, records, "explanation", judged.explanation)
    return f"{head}{calls}{recorded}</div>"


def _iteration(r: Refinement, it: Iteration, records: dict[str, CallRecord], anchor: str) -> str:
    ident = f"{anchor}-iter-{it.iteration}"
    chips = "".join(
        f'<span class="chip{" low" * (m in it.low_metrics)}">{e(m)} {"—" if j.score is None else j.score}'
        f"{' ↺' * j.carried_over}</span>"
        for m, j in it.metrics.items()
    )
    parts = [
        f'<details class="iteration" id="{ident}"><summary>Iteration {it.iteration}'
        f'{" · kept" * (it.iteration == r.kept)}<span class="chips">{chips}</span></summary>'
    ]
    if it.regeneration_prompt is not None:
        previous = r.iterations[it.iteration - 1]
        feedback = feedback_text(previous.metrics, previous.low_metrics)
        # The feedback alone when it is verbatim inside the prompt; otherwise the whole prompt.
        shown = feedback if feedback and feedback in it.regeneration_prompt else it.regeneration_prompt
        parts.append(
            f"<h4>Feedback that produced this assessment (iteration {previous.iteration}'s judge)</h4>"
            f'<pre class="feedback">{e(shown.strip())}</pre><p class="note">The full regeneration prompt is '
            "the user message of the assessment call below.</p>"
        )
    a = it.assessment
    status = '<span class="badge ok">valid</span>' if a.valid else '<span class="badge bad">invalid</span> '
    parts.append(f"<h4>Assessment {status}{e(a.problem or '')}</h4>")
    if a.unverified_quotes:
        quotes = "; ".join(f"“{e(q)}”" for q in a.unverified_quotes)
        parts.append(f"<p>Quotes not found in the transcript: {quotes}</p>")
    parts += [_calls(a.call_keys, records, f"{ident}-assess", "assessment", False)]
    parts += [_as_recorded(a.call_keys, records, "assessment", a.text), "<h4>Judge</h4>"]
    parts += [_judgement(r, it, m, records, anchor) for m in it.metrics]
    return "".join(parts) + "</details>"


def _item(r: Refinement, records: dict[str, CallRecord], anchor: str) -> str:
    refined = len(r.iterations) - 1
    transcript = _transcript(r, records)
    shown = (
        f'<details class="transcript" id="{anchor}-transcript"><summary>Transcript '
        f"({transcript.count(chr(10)) + 1} lines; every prompt below contains it)</summary>"
        f"<pre>{e(transcript)}</pre></details>"
        if transcript is not None
        else '<p class="note">Transcript: not recoverable from the recorded judge prompts.</p>'
    )
    return (
        f'<section class="item" id="{anchor}"><h3>Item {e(r.item)}</h3><p>Stop reason: '
        f"<strong>{e(r.stop_reason)}</strong> ({e(STOP_REASONS.get(r.stop_reason, 'unknown'))}) · {refined} "
        f"refinement iteration{'s' * (refined != 1)} · kept iteration {r.kept} · mean score "
        f"{_mean(r.iterations[0].metrics)} → {_mean(r.iterations[r.kept].metrics)}</p>"
        f'<div class="tools"></div>{shown}{_trajectory(r, anchor)}'
        + "".join(_iteration(r, it, records, anchor) for it in r.iterations)
        + "</section>"
    )


def render_html(
    refinements: list[Refinement], summary: dict[str, Any], records: dict[str, CallRecord], title: str
) -> str:
    """The report as one HTML document; `records` maps call keys to calls (see load_records)."""
    anchors: list[str] = []
    for r in refinements:
        # Distinct items can slug alike ("a b", "a-b"); a counter keeps every anchor unique.
        anchor, n = f"item-{_slug(r.item)}", 1
        while anchor in anchors:
            anchor, n = f"item-{_slug(r.item)}-{n}", n + 1
        anchors.append(anchor)
    body = "".join(_item(r, records, a) for r, a in zip(refinements, anchors, strict=True))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{e(CSP)}">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{e(title)}</title><style>{STYLE}</style></head><body><main><header><h1>{e(title)}</h1>"
        f"{_header(refinements, summary, records)}</header>{_figure2(summary)}{_nav(refinements, anchors)}"
        f"<h2>Per item: iterations, prompts and replies</h2>{body}</main>"
        f"<script>{JS}</script></body></html>\n"
    )
