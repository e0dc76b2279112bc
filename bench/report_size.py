"""The HTML report at the paper's scale: the size of its pages, and how fast headless Chromium first
paints what a reader opens (the index, and the largest item page).

    .venv/bin/python bench/report_size.py                       # 142 items x 10 iterations
    .venv/bin/python bench/report_size.py --items 20 --keep /tmp/report-bench

Builds a synthetic experiment the way the refine stage builds one (the real prompt templates, the
real feedback text, refine.rejudge=low, judge re-asks), writes its refinement records and
recordings, then renders the report from them as the aggregate stage does. The worst case of the
paper's setting: every item runs all refine.max_iterations iterations (some metric stays low).
Lengths, chosen to be realistic rather than kind: DAIC-WOZ-length transcripts (~20,000 characters),
assessments of ~2,400 characters (the assess stage's 700-token budget) and judge replies of ~600
(256 tokens), every text distinct. No model and no shared data are needed.

Prints the size of the index page, of the largest item page, of all pages together and of all of
them zipped (for mail), how long rendering took, and, where /usr/bin/chromium and
/usr/bin/chromedriver exist, Chromium's first contentful paint, DOMContentLoaded and load event of the
index and of the largest item page, each the median of --loads fresh page loads.
"""

from __future__ import annotations

import argparse
import io
import random
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.data.jsonl import write_jsonl
from pipeline.data.transcripts import Transcript, Turn
from pipeline.experiments.paper.aggregation import compute_metrics
from pipeline.experiments.paper.report.html import load_records, write_report
from pipeline.judges.rubric.judge import judge_prompt
from pipeline.judges.rubric.prompts import ASSESS_PROMPT, SCORE_REMINDER, SYSTEM_PROMPT
from pipeline.judges.rubric.results import Assessment, MetricJudgement
from pipeline.judges.rubric.settings import AssessSettings, JudgeSettings
from pipeline.llm.recordings import stage_writer
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import CallContext, ChatReply, ChatRequest, Message, ModelIdentity, Options
from pipeline.loops.feedback import low_metrics, regeneration_prompt
from pipeline.loops.results import Iteration, Refinement, read_refinements
from pipeline.loops.settings import RefineSettings

MODEL = ModelIdentity(backend="ollama", name="gemma3:27b", digest="sha256:a418f5838eaf")
METRICS = JudgeSettings().metrics
WORDS = [
    "i",
    "um",
    "uh",
    "yeah",
    "you",
    "know",
    "like",
    "really",
    "sleep",
    "sleeping",
    "tired",
    "work",
    "job",
    "family",
    "mother",
    "father",
    "sister",
    "friends",
    "weekend",
    "school",
    "money",
    "stress",
    "anxious",
    "down",
    "hopeless",
    "nights",
    "mornings",
    "appetite",
    "eating",
    "food",
    "energy",
    "concentrate",
    "focus",
    "doctor",
    "therapy",
    "medication",
    "better",
    "worse",
    "months",
    "weeks",
    "years",
    "always",
    "never",
    "sometimes",
    "feel",
    "felt",
    "think",
    "thought",
    "said",
    "going",
    "went",
    "home",
    "city",
    "moved",
    "alone",
    "people",
    "talk",
    "talking",
    "laugh",
]
QUESTIONS = (
    "how are you doing today",
    "where are you from originally",
    "how have you been feeling lately",
    "when was the last time you felt really happy",
    "how easy is it for you to get a good night's sleep",
    "have you been diagnosed with depression",
    "what are you most proud of in your life",
    "tell me more about that",
)


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _prose(rng: random.Random, chars: int) -> str:
    text = ""
    while len(text) < chars:
        text += rng.choice(WORDS) + " "
    return text[: max(chars, 1)].rstrip()


def make_transcript(rng: random.Random, item: str, chars: int) -> Transcript:
    turns: list[Turn] = []
    size = 0
    while size < chars:
        text = rng.choice(QUESTIONS) if len(turns) % 2 == 0 else _words(rng, rng.randint(4, 40))
        if rng.random() < 0.05:
            text += " <laughter>"
        turns.append(Turn(speaker="Ellie" if len(turns) % 2 == 0 else "Participant", text=text))
        size += len(text) + 14
    return Transcript(item_id=item, turns=tuple(turns), source=f"{item}_P/{item}_TRANSCRIPT.csv")


def make_assessment(rng: random.Random, transcript: Transcript, chars: int) -> str:
    said = [t.text for t in transcript.turns if t.speaker == "Participant"]
    tags = ("assessment", "PHQ8_symptoms", "social_factors", "biological_factors", "risk_factors")
    per_tag = chars // len(tags)
    parts = []
    for tag in tags:
        quotes = "\n".join(f'    "{rng.choice(said)[:120]}"' for _ in range(2))
        frame = f"<{tag}>\n  \n  <exact_quotes>\n{quotes}\n  </exact_quotes>\n</{tag}>\n\n"
        parts.append(frame.replace("\n  \n", f"\n  {_prose(rng, per_tag - len(frame))}\n", 1))
    return "".join(parts).strip()


def judge_reply(rng: random.Random, chars: int, score: int | None) -> str:
    explanation = f"Explanation: {_prose(rng, chars - 22)}"
    return explanation if score is None else f"{explanation}\nScore: {score}"


class Experiment:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.calls: dict[str, list[RecordedCall]] = {"assess": [], "judge": [], "refine": []}
        self.refine = RefineSettings(max_iterations=args.iterations)
        self.assess, self.judge = AssessSettings(), JudgeSettings()

    def call(self, stage: str, context: CallContext, messages: tuple[Message, ...], reply: str) -> str:
        budget = self.judge.num_predict if context.label("role") == "judge" else self.assess.num_predict
        request = ChatRequest(messages=messages, options=Options(num_predict=budget))
        record = CallRecord.new(MODEL, request, ChatReply(text=reply))
        self.calls[stage].append(RecordedCall(context=context, record=record))
        return record.key

    def judged(
        self, stage: str, transcript: Transcript, text: str, metric: str, it: int, low: bool
    ) -> MetricJudgement:
        score = self.rng.choice((2, 3)) if low else self.rng.choice((4, 5))
        messages: tuple[Message, ...] = (
            Message(role="user", content=judge_prompt(metric, transcript.text, text)),
        )
        context = CallContext(
            stage=stage, item=transcript.item_id, step=it, labels={"metric": metric, "role": "judge"}
        )
        keys = []
        # One judge reply in twenty has no score and is re-asked once, as judge.max_attempts allows.
        if self.rng.random() < 0.05:
            unread = judge_reply(self.rng, self.args.reply_chars, None)
            keys.append(self.call(stage, context, messages, unread))
            reminder = SCORE_REMINDER.format(problem="no score")
            messages = (
                *messages,
                Message(role="assistant", content=unread),
                Message(role="user", content=reminder),
            )
            context = context.at(attempt=1)
        reply = judge_reply(self.rng, self.args.reply_chars, score)
        keys.append(self.call(stage, context, messages, reply))
        return MetricJudgement(
            metric=metric, score=score, reading="labelled", explanation=reply, call_keys=tuple(keys)
        )

    def item(self, number: int) -> Refinement:
        item = str(300 + number)
        transcript = make_transcript(self.rng, item, self.args.transcript_chars)
        history: list[Iteration] = []
        for it in range(self.refine.max_iterations + 1):
            stage = "refine" if it else "assess"
            messages: tuple[Message, ...]
            if it == 0:
                prompt = None
                messages = (Message(role="user", content=ASSESS_PROMPT.format(transcript=transcript.text)),)
            else:
                prompt = regeneration_prompt(transcript, history, self.refine, self.assess)
                messages = (
                    Message(role="system", content=SYSTEM_PROMPT),
                    Message(role="user", content=prompt),
                )
            text = make_assessment(self.rng, transcript, self.args.assessment_chars)
            context = CallContext(
                stage=stage, item=item, step=it, labels={"role": "refine" if it else "assess"}
            )
            key = self.call(stage, context, messages, text)
            assessment = Assessment(item=item, text=text, sections={}, valid=True, call_keys=(key,))
            # Completeness stays low (the paper's weakest metric), so every item runs every iteration.
            metrics: dict[str, MetricJudgement] = {}
            for metric in METRICS:
                if it and metric not in history[-1].low_metrics:
                    metrics[metric] = history[-1].metrics[metric].model_copy(update={"carried_over": True})
                    continue
                low = metric == "completeness" or self.rng.random() < 0.2
                metrics[metric] = self.judged(
                    "judge" if it == 0 else "refine", transcript, text, metric, it, low
                )
            low_now = low_metrics(metrics, self.refine)
            history.append(
                Iteration(
                    iteration=it,
                    assessment=assessment,
                    metrics=metrics,
                    low_metrics=low_now,
                    regeneration_prompt=prompt,
                )
            )
        return Refinement(
            item=item, iterations=tuple(history), stop_reason="max_iterations", kept=len(history) - 1
        )

    def write(self, root: Path) -> list[Refinement]:
        refinements = [self.item(n) for n in range(self.args.items)]
        write_jsonl(root / "outputs" / "refinement.jsonl", refinements)
        for stage, calls in self.calls.items():
            stage_writer.write_stage(root / "recordings" / stage, calls)
        return refinements


def first_paint(path: Path, loads: int) -> dict[str, float]:
    from tests.webdriver import CHROMEDRIVER, CHROMIUM, Chrome

    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        print(f"(no {CHROMIUM} / {CHROMEDRIVER}: first paint not measured)")
        return {}
    timing = (
        "const nav = performance.getEntriesByType('navigation')[0];"
        "const fcp = performance.getEntriesByName('first-contentful-paint')[0];"
        "return [fcp.startTime, nav.domContentLoadedEventEnd, nav.loadEventEnd];"
    )
    samples: list[list[float]] = []
    with tempfile.TemporaryDirectory(prefix="judgeloop-bench-chrome-") as tmp:
        for n in range(loads):
            # A fresh browser each time: nothing of the previous load is cached or warm.
            with Chrome(
                Path(tmp) / f"profile-{n}", Path(tmp) / f"chromedriver-{n}.log", timeout=120
            ) as chrome:
                chrome.get(path.as_uri())
                chrome.wait_until("return document.readyState === 'complete';", timeout=60)
                # A small page can be complete before its first paint is recorded.
                chrome.wait_until(
                    "return performance.getEntriesByName('first-contentful-paint').length > 0;", timeout=60
                )
                samples.append([float(v) for v in chrome.execute(timing)])
    names = ("first contentful paint", "DOMContentLoaded", "load event")
    return {name: statistics.median(s[i] for s in samples) for i, name in enumerate(names)}


def zipped_size(files: list[Path], root: Path) -> int:
    """The size of a zip of `files` (deflated, as a mail attachment would be), paths relative to root."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as archive:
        for path in files:
            archive.write(path, path.relative_to(root))
    return len(buffer.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=142)
    parser.add_argument(
        "--iterations", type=int, default=10, help="refine.max_iterations; every item runs them all"
    )
    parser.add_argument("--transcript-chars", type=int, default=20_000)
    parser.add_argument("--assessment-chars", type=int, default=2_400)
    parser.add_argument("--reply-chars", type=int, default=600)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--loads", type=int, default=3, help="page loads in Chromium (median reported)")
    parser.add_argument(
        "--keep", type=Path, help="write the experiment and report here (default: a temp dir)"
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="judgeloop-bench-report-") as tmp:
        root = args.keep or Path(tmp)
        started = time.perf_counter()
        Experiment(args).write(root)
        built = time.perf_counter() - started

        started = time.perf_counter()
        refinements = read_refinements(root / "outputs" / "refinement.jsonl", METRICS)
        records = load_records(root / "recordings")
        loaded = time.perf_counter() - started
        started = time.perf_counter()
        index = root / "report.html"
        summary = compute_metrics(refinements, METRICS)
        report = write_report(index, refinements, summary, records, "report size bench")
        rendered = time.perf_counter() - started

        pages = sorted((root / report.folder).iterdir())
        largest = max(pages, key=lambda p: p.stat().st_size)
        files = [index, *pages]
        total = sum(p.stat().st_size for p in files)
        texts = sum(len(m.content.encode()) for r in records.values() for m in r.request.messages) + sum(
            len(r.reply.text.encode()) for r in records.values()
        )
        iterations = sum(len(r.iterations) for r in refinements)
        print(f"experiment: {len(refinements)} items, {iterations} iterations, {len(records)} recorded calls")
        print(f"  prompts and replies as sent: {texts / 1e6:.1f} MB; built in {built:.1f} s")
        print(f"index {index.name}: {index.stat().st_size / 1e3:.1f} kB")
        print(f"largest item page {report.folder}/{largest.name}: {largest.stat().st_size / 1e6:.3f} MB")
        print(
            f"all {len(files)} pages: {total / 1e6:.2f} MB ({zipped_size(files, root) / 1e6:.2f} MB zipped); "
            f"read in {loaded:.1f} s, rendered and written in {rendered:.1f} s"
        )
        loads = f"median of {args.loads} fresh loads, headless Chromium"
        for label, page in (("index", index), ("largest item page", largest)):
            for name, ms in first_paint(page, args.loads).items():
                print(f"  {label}, {name}: {ms / 1000:.2f} s ({loads})")


if __name__ == "__main__":
    main()
