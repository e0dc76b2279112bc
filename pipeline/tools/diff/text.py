"""`judgeloop diff`'s text (100 columns) and one item's two calls side by side (the JSON: as_json)."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence

from pipeline.experiments.judgements import Judgement
from pipeline.llm.records import RecordedCall
from pipeline.llm.terminal import shown_line, text_lines
from pipeline.stats.paired import Interval, TestResult, fewest_items
from pipeline.stats.repeat_noise import RepeatNoise
from pipeline.stats.stability import Stability
from pipeline.tools.diff.causes import CAUSES
from pipeline.tools.diff.summary import Change, MetricDiff, RoundDiff

WIDTH = 100
# What the statistics below test, said once: a p-value is not the judge's noise, nor one metric's alone;
# and what n counts: zero differences are dropped (Wilcoxon's treatment, not Pratt's), so n can be
# well below the items paired.
UNITS = (
    "tests: one observation per item (its iterations as one); Holm: each p adjusted for all below",
    "n: the items whose mean score (or net pass/fail) moved; an item that did not move is left out",
    "round 0 (judged before any revision) apart from later rounds (what both runs went on to revise)",
)
# Said where neither run asked any judgement of a round more than once: nothing measured the noise.
NOISE_UNKNOWN = (
    "repeat noise: unknown (each judgement asked once in both runs); to measure it, ask each",
    "  several times (judge.samples: 3, or the design's own, at a temperature above 0)",
)
# How a pair's judged input compares (summary._input): the same id in both runs, another, one run
# naming none, or neither (the design's judge reads its data as given: not compared).
INPUTS = ("same", "changed", "unknown", "fixed")
LISTED = 20  # changed judgements listed per metric in the text (all in --json and --html)


def number(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "—"
    if float(value).is_integer():
        return str(int(value))
    shown = f"{value:.{digits}f}".rstrip("0").rstrip(".")
    return "0" if shown == "-0" else shown  # a kappa of -1e-17 is 0, not "-0"


def p_value(value: float) -> str:
    return f"{value:.2g}" if value < 0.001 else f"{value:.3f}".rstrip("0").rstrip(".") or "0"


def interval(mean: Interval | None) -> str:
    """The mean of the items' differences and its interval, or why there is none."""
    if mean is None:
        return "mean B−A —"
    if mean.items < 2:  # every resample is the one item: an interval of no width, saying nothing
        return f"mean B−A {mean.estimate:+.3f} (one item: no interval)"
    head = f"mean B−A {mean.estimate:+.3f}"
    if mean.low is None or mean.high is None:
        needed = fewest_items(mean.confidence)
        return (
            f"{head} over {mean.items} items: too few for a {mean.confidence:.0%} interval ({needed} needed)"
        )
    bounds = f"[{mean.low:+.3f}, {mean.high:+.3f}]"
    if mean.method == "exact":
        return f"{head}, {mean.confidence:.1%} CI {bounds} (exact if symmetric; {mean.items} items)"
    return (
        f"{head}, {mean.confidence:.0%} CI {bounds} "
        f"(bootstrap over {mean.items} items, {mean.resamples} resamples, seed {mean.seed})"
    )


def noise_lines(part: RoundDiff) -> list[str]:
    """The round's change against the judge's repeat noise, or that nothing measured the noise."""
    found = part.noise
    if not part.moved:
        return ["repeat noise: no score moved (a verdict alone), no change to set against it"]
    if found is None:
        return list(NOISE_UNKNOWN)
    holm = "" if part.noise_holm is None else f", Holm {p_value(part.noise_holm)}"
    how = {  # Monte Carlo named by its draws (the line's width)
        "exact": f"exact, {found.splits} split" + ("" if found.splits == 1 else "s"),
        "Monte Carlo": f"{found.splits} draws, seed {found.seed}",
    }.get(found.method, found.method)
    ratio = "no sample spread" if found.ratio is None else f"= {found.ratio:+.1f} SE"
    return [
        f"repeat noise: SE ±{found.noise_se:.3f} ({spread(found)})",
        f"  change {found.change:+.3f} {ratio}; samples permuted: p = {p_value(found.p_value)}{holm} ({how})",
    ]


def spread(found: RepeatNoise) -> str:
    """Each run's within-judgement SD, or that it asked once and was taken to be as noisy."""
    measured = [
        f"{side}'s sample SD {number(sd)}"
        for side, sd in (("A", found.sd_a), ("B", found.sd_b))
        if sd is not None
    ]
    once = [
        f"{side} asked once, assumed alike"
        for side, sd in (("A", found.sd_a), ("B", found.sd_b))
        if sd is None
    ]
    return "; ".join([*measured, *once, f"{found.pairs} pair" + ("" if found.pairs == 1 else "s")])


def test_line(result: TestResult | None, what: str, adjusted: float | None = None) -> str:
    """A test of `what` (the scores, pass/fail): its p-value and, beside it, Holm's over the diff's
    tests; n counts items (the unit). None: no item moved, nothing to test."""
    if result is None:
        return f"{what}: no item moved, nothing to test"
    holm = "" if adjusted is None else f", Holm {p_value(adjusted)}"
    items = f"{result.n} item" + ("" if result.n == 1 else "s")
    return f"{result.name}: p = {p_value(result.p_value)}{holm} (n = {items}) on {what}"


def verdict(judgement: Judgement) -> str:
    flag = "" if judgement.passed is None else (" pass" if judgement.passed else " fail")
    return number(judgement.score) + flag


def metric_lines(row: MetricDiff, changes: Sequence[Change]) -> list[str]:
    if not row.changed and not row.only_a and not row.only_b:
        return [_fitted(f"{row.design} · {row.metric}: {row.paired} paired, none changed")]
    lines = [
        f"{row.design} · {row.metric}",
        f"  paired {row.paired}   changed {row.changed}   flipped pass→fail {row.pass_to_fail}, "
        f"fail→pass {row.fail_to_pass}   only in A {row.only_a}   only in B {row.only_b}",
    ]
    for part in row.rounds:
        lines += round_lines(part)
    for side, found in row.stability.items():
        lines.append(f"  {side}'s samples: {stability_text(found)}")
    if row.changed:
        why = ", ".join(f"{kind} {row.causes[kind]}" for kind in CAUSES if row.causes[kind])
        lines.append(f"  why: {why}")
        for change in changes[:LISTED]:
            lines.append(change_line(change))
        if len(changes) > LISTED:
            lines.append(f"    … {len(changes) - LISTED} more (--json lists all)")
    return [_fitted(line) for line in lines]


def _title_parts(part: RoundDiff) -> tuple[str, str]:
    """Which round with its counts, and whether its input was the same in both runs or not. The
    same input says what a change is not (the input's), never that the judge changed: a round may
    have no change, and a metric read from no judge call (the selection's `selected`) moves with its
    own params. Later rounds pair only what both runs revised, each its own judge's choice: a subset."""
    if part.name == "0":
        where = "round 0, before any revision"
    else:
        span = f"it{part.first}" if part.first == part.last else f"it{part.first}-{part.last}"
        where = f"later rounds ({span}, both revised)"
    same, changed, fixed = (part.inputs[kind] for kind in ("same", "changed", "fixed"))
    if same == part.paired:
        what = "same input: no change is the input's"
    elif fixed == part.paired:
        what = "input: fixed data, not compared"
    elif changed == part.paired:
        what = f"input changed in all {changed}" if changed > 1 else "input changed"
    else:
        what = f"input changed in {changed}, the same in {same}"
        what += "".join(f", {kind} in {part.inputs[kind]}" for kind in INPUTS[2:] if part.inputs[kind])
    return f"{where}: {part.paired} paired, {part.changed} changed", what


def round_title(part: RoundDiff) -> str:
    """The round's title in one line (the page's; the text breaks a long one: _title_lines)."""
    return "; ".join(_title_parts(part))


def _title_lines(part: RoundDiff) -> list[str]:
    """The title at two columns in, its input on a line of its own where one line would be cut."""
    head, what = _title_parts(part)
    one = f"  {head}; {what}"
    return [one] if len(one) <= WIDTH else [f"  {head};", f"    {what}"]


def round_lines(part: RoundDiff) -> list[str]:
    """A round's statistics, indented under its title (its title alone where none changed)."""
    if not part.changed:
        return _title_lines(part)
    lines = []
    if part.scored:
        lines += [
            interval(part.mean),
            test_line(part.score_test, "the scores", part.score_holm),
            f"agreement {number(part.agreement)} exact, κ {number(part.kappa)} (quadratic-weighted Cohen's)",
        ]
    if part.verdicts:
        lines.append(test_line(part.pass_test, "pass/fail", part.pass_holm))
    if part.scored:
        lines += noise_lines(part)
    return [*_title_lines(part), *(f"    {line}" for line in lines)]


def stability_text(found: Stability) -> str:
    return (
        f"within-item SD {number(found.within_sd)}, straddling the threshold "
        f"{number(found.straddle_share)}, Krippendorff α {number(found.alpha_interval)}"
    )


def change_line(change: Change) -> str:
    a, b = change.a, change.b
    where = f"{a.item} it{a.iteration}"
    return f"    {where:<18} {verdict(a):>9} → {verdict(b):<9} {change.cause.text}"


def _fitted(line: str) -> str:
    """A line of the text shown safely, once (an escape's backslash would be escaped again), and
    then cut to WIDTH: cut first, the escapes lengthened it past it."""
    shown = _one_line(line)
    return shown if len(shown) <= WIDTH else shown[: WIDTH - 1] + "…"


def fit(text: str, width: int) -> str:
    """`text` in `width` columns, its middle left out where it is longer (a path's ends say most)."""
    if len(text) <= width:
        return text
    half = (width - 1) // 2
    return text[:half] + "…" + text[len(text) - (width - 1 - half) :]


def unrecorded_lines(unrecorded: Sequence[tuple[int, int]]) -> list[str]:
    """A line for each run whose recordings lack calls its judgements name (missing, named)."""
    lines = []
    for side, (missing, named) in zip("AB", unrecorded, strict=True):
        if missing:
            lines.append(
                f"run {side}: {missing} of the {named} calls its results name are not in its recordings "
                "(why: unrecorded)"
            )
    return lines


def render(
    names: Sequence[str],
    rows: Sequence[MetricDiff],
    changes: Sequence[Change],
    unrecorded: Sequence[tuple[int, int]] = ((0, 0), (0, 0)),
) -> str:
    a, b = names
    total = sum(r.paired for r in rows)
    lines = [
        f"A: {fit(_one_line(a), WIDTH - 3)}",
        f"B: {fit(_one_line(b), WIDTH - 3)}",
        f"{total} judgements paired, {len(changes)} changed",
    ]
    lines += [_fitted(line) for line in unrecorded_lines(unrecorded)]
    if any(r.tested for r in rows):
        lines += UNITS
    for row in rows:
        mine = [c for c in changes if (c.a.design, c.a.metric) == (row.design, row.metric)]
        block = metric_lines(row, mine)
        lines += block if len(block) == 1 and lines[-1].endswith("none changed") else ["", *block]
    if not rows:
        lines.append("(neither run has a judgement of any design)")
    # Each line is shown once (metric_lines' already are), so an item id or a model name the other
    # run recorded cannot start another line.
    return "\n".join(lines) + "\n"


def prompt_text(call: RecordedCall | None) -> str:
    if call is None:
        return "(not recorded)\n"
    return "".join(f"[{m.role}]\n{m.content}\n" for m in call.record.request.messages)


def reply_text(call: RecordedCall | None) -> str:
    return "(not recorded)\n" if call is None else call.record.reply.text + "\n"


def replies_text(judgement: Judgement | None, calls: Mapping[str, RecordedCall]) -> str:
    """The replies a judgement was read from: its one call's, or, where it made several (samples,
    re-asks), each in the order asked under its number (the last alone is not what was read)."""
    if judgement is None or not judgement.keys:
        return reply_text(None)
    found = [calls.get(key) for key in judgement.keys]
    if len(found) == 1:
        return reply_text(found[0])
    return "".join(f"[call {i} of {len(found)}]\n{reply_text(call)}" for i, call in enumerate(found, 1))


def replies_title(a: Judgement | None, b: Judgement | None) -> str:
    several = any(j is not None and len(j.keys) > 1 for j in (a, b))
    return "replies (each call's, as asked)" if several else "reply (the one read)"


def unified(title: str, before: str, after: str) -> list[str]:
    found = list(difflib.unified_diff(text_lines(before), text_lines(after), "A", "B", lineterm="", n=2))
    return [f"--- {title}", *(found or ["(the same)"])]


def _keys(judgement: Judgement | None) -> str:
    if judgement is None or not judgement.keys:
        return "no call named"
    more = len(judgement.keys) - 1
    return f"key {judgement.keys[0]}" + (f" (and {more} more calls: --json lists them)" if more else "")


def side_by_side(
    a: Judgement | None,
    b: Judgement | None,
    calls: tuple[Mapping[str, RecordedCall], Mapping[str, RecordedCall]],
    cause: str,
) -> str:
    """One judgement's two calls: the scores, the cause, the prompt's diff and the reply's."""
    some = a or b
    assert some is not None
    first = [
        None if j is None or not j.keys else side.get(j.keys[0])
        for j, side in zip((a, b), calls, strict=True)
    ]
    head = f"{some.design} · item {some.item} · iteration {some.iteration} · {some.metric}"
    lines = [
        head,
        f"  A: {'(not judged)' if a is None else verdict(a)}   {_keys(a)}",
        f"  B: {'(not judged)' if b is None else verdict(b)}   {_keys(b)}",
        f"  {cause}",
        *unified("prompt (first ask)", prompt_text(first[0]), prompt_text(first[1])),
        *unified(replies_title(a, b), replies_text(a, calls[0]), replies_text(b, calls[1])),
    ]
    return "\n".join(_one_line(line) for line in lines) + "\n"  # one line each, as render


def _one_line(line: str) -> str:
    """A line of the text shown safely (pipeline.llm.terminal.shown) and kept one line: a line break
    in it (a model name's, an item id's) as its escape. A tab stays a tab, as audit prints it: it
    cannot start a line, and a prompt's or a reply's own layout is what the diff shows."""
    return shown_line(line)
