"""What the report shows of one item: its transcript, its scores over the iterations, and every
iteration down to the calls it made (each prompt and reply, re-asks included).

Builds the templates' data (pipeline.experiments.paper.report.views) in page order: a text is placed
(.texts) where a reader meets it first, so the transcript at the top of the item, an
assessment under the call that wrote it, and later prompts refer back to them.
"""

from __future__ import annotations

from markupsafe import Markup

from pipeline.experiments.paper.report.texts import PageTexts, Placed
from pipeline.experiments.paper.report.views import (
    CallView,
    Carried,
    Cell,
    Chip,
    ItemView,
    IterationView,
    JudgementView,
    MessageView,
    Row,
)
from pipeline.judges.rubric.judge import ReplyReader, judge_prompt
from pipeline.judges.rubric.judge_prompts import JUDGE_PROMPTS
from pipeline.judges.rubric.prompts import JSON_JUDGE_FORMAT
from pipeline.judges.rubric.results import MetricJudgement
from pipeline.llm.records import CallRecord
from pipeline.llm.terminal import spelled
from pipeline.llm.types import Options
from pipeline.loops.feedback import feedback_text
from pipeline.loops.results import Iteration, Refinement
from pipeline.reports.pages import slug
from pipeline.reports.svg import sparkline_svg

STOP_REASONS = {
    "passed_initially": "every metric passed at iteration 0; not refined",
    "passed": "refined until every metric passed",
    "max_iterations": "still low after the last allowed iteration",
    "disabled": "refinement disabled (max_iterations: 0)",
    "all_unscored": "stopped: an iteration's every judgement was unscored (refine.stop_unscored)",
    "stage_unscored": (
        "not refined: too many of the judge's judgements were unscored (refine.stop_unscored_share)"
    ),
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
# A message longer than this on the page (after references) is collapsed behind a summary line.
_SHOWN_CHARS, _SHOWN_LINES = 600, 12


def mean(metrics: dict[str, MetricJudgement]) -> str:
    scored = [m.score for m in metrics.values() if m.score is not None]
    return f"{sum(scored) / len(scored):.2f}" if scored else "—"


def options_text(record: CallRecord) -> str:
    return options_line(record.request.options)


def options_line(options: Options) -> str:
    """A call's options as the report spells them (options_text)."""
    return " ".join(f"{k}={spelled(v)}" for k, v in options.model_dump(mode="json").items())


def recover_transcript(r: Refinement, records: dict[str, CallRecord]) -> str | None:
    """The transcript, cut out of a recorded judge prompt by its template and checked by rebuilding it.

    The results do not carry the transcript and the aggregate stage does not read the data; the
    judge prompt holds it verbatim between two fixed template parts, so it can be recovered exactly.
    A judge asked for JSON (judge.output: json) has the shape it must answer in after the rubric.
    """
    for it in r.iterations:
        for metric, judged in it.metrics.items():
            record = records.get(judged.call_keys[0]) if judged.call_keys else None
            if judged.carried_over or record is None or metric not in JUDGE_PROMPTS:
                continue
            # The rebuilt prompt must equal the recorded one: a transcript ending like the JSON
            # instructions cannot be cut short by mistake.
            prompt, assessment = record.request.messages[0].content, it.assessment.text
            head, _, rest = JUDGE_PROMPTS[metric].partition("{transcript}")
            tail = rest.replace("{qualitative_output}", assessment)
            for suffix in ("", JSON_JUDGE_FORMAT):
                rubric = prompt.removesuffix(suffix) if suffix else prompt
                fits = rubric.startswith(head) and rubric.endswith(tail)
                if not fits or len(rubric) < len(head) + len(tail):
                    continue
                candidate = rubric[len(head) : len(rubric) - len(tail)]
                if judge_prompt(metric, candidate, assessment) + suffix == prompt:
                    return candidate
    return None


class ItemBuilder:
    """Builds ItemViews for one page; `option_names` names each distinct set of call options; `read`
    reads a judge reply as the judge stage did (pipeline.judges.rubric.judge.reply_reader)."""

    def __init__(
        self,
        records: dict[str, CallRecord],
        texts: PageTexts,
        option_names: dict[str, str],
        read: ReplyReader,
    ) -> None:
        self.records, self.texts, self.option_names, self.read = records, texts, option_names, read

    def item(self, r: Refinement, anchor: str) -> ItemView:
        self.texts.start_item()
        text = recover_transcript(r, self.records)
        transcript = None if text is None else self.texts.place(text, f"{anchor}-transcript", "transcript")
        metrics = tuple(r.iterations[0].metrics)
        return ItemView(
            id=anchor,
            name=r.item,
            stop_reason=r.stop_reason,
            stop_text=STOP_REASONS.get(r.stop_reason, "unknown"),
            refined=len(r.iterations) - 1,
            kept=r.kept,
            mean_before=mean(r.iterations[0].metrics),
            mean_after=mean(r.iterations[r.kept].metrics),
            transcript=transcript,
            metrics=metrics,
            rows=tuple(self._row(r, it, metrics, anchor) for it in r.iterations),
            sparklines=tuple(
                Markup(
                    sparkline_svg(
                        [getattr(it.metrics.get(m), "score", None) for it in r.iterations], r.kept, m
                    )
                )
                for m in metrics
            ),
            iterations=tuple(self._iteration(r, it, anchor) for it in r.iterations),
        )

    @staticmethod
    def _row(r: Refinement, it: Iteration, metrics: tuple[str, ...], anchor: str) -> Row:
        cells: list[Cell | None] = []
        for metric in metrics:
            judged = it.metrics.get(metric)
            if judged is None:
                cells.append(None)
                continue
            carried = judged.carried_over
            flags = {"low": metric in it.low_metrics, "unscored": judged.score is None, "carried": carried}
            # A carried-over score links to the iteration that judged it: its calls are there.
            source = ItemBuilder._judged_at(r, it.iteration, metric) if carried else it.iteration
            cells.append(
                Cell(
                    text=("—" if judged.score is None else str(judged.score)) + " ↺" * carried,
                    classes=" ".join(["num", *(k for k, on in flags.items() if on)]),
                    href=f"#{anchor}-iter-{source}-{slug(metric)}",
                )
            )
        return Row(
            it.iteration, it.iteration == r.kept, tuple(cells), it.assessment.valid, ", ".join(it.low_metrics)
        )

    def _iteration(self, r: Refinement, it: Iteration, anchor: str) -> IterationView:
        ident = f"{anchor}-iter-{it.iteration}"
        feedback, feedback_from = None, it.iteration - 1
        if it.regeneration_prompt is not None:
            previous = r.iterations[it.iteration - 1]
            text = feedback_text(previous.metrics, previous.low_metrics)
            # The feedback alone when it is verbatim inside the prompt; otherwise the whole prompt.
            shown = text if text and text in it.regeneration_prompt else it.regeneration_prompt
            feedback = self.texts.place(
                shown.strip(), f"{ident}-feedback", f"feedback, iteration {it.iteration}"
            )
        a = it.assessment
        name = f"assessment, iteration {it.iteration}"
        calls = self._calls(a.call_keys, f"{ident}-assess", name)
        recorded = self._as_recorded(a.call_keys, a.text, f"{ident}-assess-text", name)
        judgements, carried = [], []
        for metric, judged in it.metrics.items():
            if judged.carried_over:
                source = self._judged_at(r, it.iteration, metric)
                score = "—" if judged.score is None else str(judged.score)
                carried.append(Carried(metric, score, source))
            else:
                judgements.append(self._judgement(it, metric, judged, ident))
        chips = tuple(
            Chip(f"{m} {'—' if j.score is None else j.score}{' ↺' * j.carried_over}", m in it.low_metrics)
            for m, j in it.metrics.items()
        )
        return IterationView(
            id=ident,
            number=it.iteration,
            kept=it.iteration == r.kept,
            chips=chips,
            feedback=feedback,
            feedback_from=feedback_from,
            valid=a.valid,
            problem=a.problem or "",
            unverified_quotes=a.unverified_quotes,
            calls=calls,
            recorded=recorded,
            judgements=tuple(judgements),
            carried=tuple(carried),
        )

    @staticmethod
    def _judged_at(r: Refinement, iteration: int, metric: str) -> int:
        judged_at = [j for j, past in enumerate(r.iterations[:iteration]) if metric in past.metrics]
        return next((j for j in reversed(judged_at) if not r.iterations[j].metrics[metric].carried_over), 0)

    def _judgement(self, it: Iteration, metric: str, judged: MetricJudgement, base: str) -> JudgementView:
        ident = f"{base}-{slug(metric)}"
        how = READINGS.get(judged.reading, judged.reading)
        name = f"{metric} reply, iteration {it.iteration}"
        return JudgementView(
            id=ident,
            metric=metric,
            score="unscored" if judged.score is None else f"{judged.score}/5",
            how=f"unscored: {how}" if judged.score is None else f"read from {how}",
            low=metric in it.low_metrics,
            calls=self._calls(judged.call_keys, ident, name, judged),
            recorded=self._as_recorded(judged.call_keys, judged.explanation, f"{ident}-text", name),
        )

    def _as_recorded(self, keys: tuple[str, ...], text: str, ident: str, label: str) -> Placed | None:
        # Without the last call's record the text would be nowhere on the page; the results file has it.
        if keys and keys[-1] in self.records:
            return None
        return self.texts.place(text, ident, f"{label} (from the results)")

    def _calls(
        self, keys: tuple[str, ...], base: str, name: str, judged: MetricJudgement | None = None
    ) -> tuple[CallView, ...]:
        """The calls of one assessment, or of one judgement (`judged`); `name` labels the links to
        their texts."""
        calls = []
        for i, key in enumerate(keys):
            ident = f"{base}-{i}"
            title = f"call {i + 1}" + " (re-ask)" * (i > 0)
            label = f"{name}, call {i + 1}" if len(keys) > 1 else name
            record = self.records.get(key)
            if record is None:
                calls.append(CallView(ident, title, key, None, "", "", "", (), None))
                continue
            reading = note = ""
            if judged is not None:
                # Read again as the stage reads (the metric, the decimal policy, the protocol):
                # a reviewer sees what each attempt yielded, re-asks included; a single call read as
                # the results say is already told by the judgement.
                read = self.read(record, judged.metric)
                if len(keys) > 1 or (read.score, read.reason) != (judged.score, judged.reading):
                    reading = "no score" if read.score is None else f"score {read.score}"
                    note = read.reason + (f" from “{read.matched}”" if read.matched else "")
                    note += f": {read.error}" if read.error else ""
            messages = []
            for j, m in enumerate(record.request.messages):
                placed = self.texts.place(m.content, f"{ident}-msg-{j}", f"{label}, {m.role} message")
                lines = (
                    placed.lead.count("\n")
                    + placed.trail.count("\n")
                    + sum(s.text.count("\n") for s in placed.segments)
                )
                collapsed = placed.shown_chars > _SHOWN_CHARS or lines >= _SHOWN_LINES
                messages.append(MessageView(m.role, placed, collapsed))
            reply = self.texts.place(record.reply.text, f"{ident}-reply", label)
            option = self.option_names[options_text(record)]
            calls.append(CallView(ident, title, key, record, reading, note, option, tuple(messages), reply))
        return tuple(calls)
