"""Re-asks per judgement on the fake Ollama server, with the extractor before and after the prose grammar.

The judge stage's own code (pipeline.judges.rubric.judge.judge_metric over the Ollama backend,
loopback HTTP, a fresh cache) judges one reply per judgement; the server answers the first ask with a
reply from the
pool and a re-ask (the format reminder) with "Explanation: ...\\nScore: N", N the reply's label, as a
judge that complies would. "Before" is pipeline/scores.py as of BASELINE (loaded from git), "after" the
working tree's. Run by hand:

    PYTHONPATH=. python bench/reasks_prose.py [--replies FILE.jsonl] [--limit N]

Pools:
  written   prose verdicts in the classes of issue 9, written for this bench (not real judge text):
            an explanation, then the verdict in one of the grammar's forms, values 1-5; plus replies
            with "Score: N" and with no score at all, which both extractors treat alike
  FILE      any JSON lines with "text" and "label" (e.g. ../shared-local/corpora/judge-replies-2/
            replies.jsonl from bench/fetch_conformance_corpus.py, or the AnnoMI replies of issue 9);
            rows whose label is not an integer 1-5 are skipped, since the judge's scale is 1-5
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import re
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from pipeline.data.transcripts import Transcript, Turn  # noqa: E402
from pipeline.judges.rubric import judge as judging  # noqa: E402
from pipeline.judges.rubric.judge_prompts import JUDGE_PROMPTS  # noqa: E402
from pipeline.judges.rubric.settings import JudgeSettings  # noqa: E402
from pipeline.judges.scores import ScoreReading  # noqa: E402
from pipeline.llm.backends.ollama import OllamaBackend  # noqa: E402
from pipeline.llm.settings import LLMSettings  # noqa: E402
from pipeline.llm.types import CallContext, Options  # noqa: E402
from pipeline.testing.fake_ollama import FakeOllama  # noqa: E402
from pipeline.testing.sessions import folder_session  # noqa: E402

BASELINE = "20925fc"  # the branch point: the extractor before issue 9
METRICS = tuple(JUDGE_PROMPTS)
_ITEM = re.compile(r"bench item (\d+)\b")

EXPLANATIONS = [
    "The summary names the low mood and the poor sleep but leaves out how long they have lasted.",
    "Every symptom the patient mentions is there, with the patient's own words quoted.",
    "The assessment drifts into advice and misses the appetite change the patient described.",
    "It is organised by PHQ-8 item and stays close to the transcript throughout.",
    "Two of the quotes cannot be found in the transcript, and the duration is guessed.",
]
# Verdicts in the classes issue 9 names, each worded here for this bench.
VERDICTS = [
    "Overall the summary is usable, resulting in a score of {v}.",
    "The structure is clear, earning a score of {v}.",
    "It handles the symptoms unevenly, giving it a score of {v} out of 5.",
    "Taking everything into account, I would score it a {v}.",
    "I score it {v} out of 5.",
    "On balance the summary scores a {v}.",
    "Scoring {v} out of 5 for relevance, it does what was asked.",
    "I'd rate this summary {v}.",
    "All told, a coherence rating of {v}.",
    "That makes for an accuracy score of {v}.",
    "In my view the summary deserves a {v}.",
    "This warrants a specificity rating of {v} out of 5.",
]
CONTROLS = [
    "Explanation: {e}\nScore: {v}",  # read before and after
    "{e} I am not sure how to score this one.",  # no score: re-asked before and after
]


@dataclass(frozen=True)
class Reply:
    pool: str
    text: str
    label: int


def written_pool() -> list[Reply]:
    replies = []
    for i, verdict in enumerate(VERDICTS):
        for value in range(1, 6):
            explanation = EXPLANATIONS[(i + value) % len(EXPLANATIONS)]
            replies.append(
                Reply("written: prose verdicts", f"{explanation} {verdict.format(v=value)}", value)
            )
    for i, control in enumerate(CONTROLS):
        for value in range(1, 6):
            text = control.format(e=EXPLANATIONS[(i + value) % len(EXPLANATIONS)], v=value)
            kind = "written: Score: N" if i == 0 else "written: no score"
            replies.append(Reply(kind, text, value))
    return replies


def file_pool(path: Path, limit: int) -> list[Reply]:
    rows: list[Reply] = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            label = row.get("label")
            if label is None or float(label) not in {1.0, 2.0, 3.0, 4.0, 5.0}:
                continue
            rows.append(Reply(f"{path.name}: {row.get('family', 'replies')}", str(row["text"]), int(label)))
    random.Random(0).shuffle(rows)
    by_pool: dict[str, list[Reply]] = {}
    for reply in rows:
        kept = by_pool.setdefault(reply.pool, [])
        if len(kept) < limit:
            kept.append(reply)
    return [reply for kept in by_pool.values() for reply in kept]


def baseline_extractor() -> ModuleType:
    source = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "show", f"{BASELINE}:pipeline/scores.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "scores_baseline.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("scores_baseline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["scores_baseline"] = module
    spec.loader.exec_module(module)
    return module


def responder_for(pool: list[Reply]) -> Callable[[dict[str, Any]], str]:
    def respond(request: dict[str, Any]) -> str:
        messages = request["messages"]
        first = next(m["content"] for m in messages if m["role"] == "user")
        found = _ITEM.search(first)
        assert found is not None, "a bench judge prompt names its item"
        reply = pool[int(found.group(1))]
        if len(messages) == 1:
            return reply.text
        return f"Explanation: as above.\nScore: {reply.label}"

    return respond


@dataclass
class Outcome:
    judgements: int = 0
    calls: int = 0
    unscored: int = 0
    wrong: int = 0
    reasons: Counter[str] | None = None


def run(pool: list[Reply], read: Callable[[str, str], ScoreReading]) -> dict[str, Outcome]:
    transcript = Transcript(
        item_id="bench",
        turns=(
            Turn(speaker="Ellie", text="how have you been sleeping"),
            Turn(speaker="Participant", text="badly"),
        ),
        source="bench",
    )
    # Room for the longest reply: the bench measures the extractor, not a cut-off reply.
    settings = JudgeSettings(max_attempts=2, num_predict=8192)
    outcomes: dict[str, Outcome] = {}
    original = judging.read_score
    judging.read_score = lambda text, metric, decimals="unscored": read(text, metric)
    try:
        with FakeOllama(responder=responder_for(pool)) as server, tempfile.TemporaryDirectory() as tmp:
            backend = OllamaBackend(LLMSettings(backend="ollama", model="test-model", base_url=server.url))
            session = folder_session(Path(tmp), backend)
            for i, reply in enumerate(pool):
                metric = METRICS[i % len(METRICS)]
                judged = judging.judge_metric(
                    session,
                    transcript,
                    f"<assessment>bench item {i}</assessment>",
                    metric,
                    settings,
                    Options(),
                    CallContext(stage="judge", item=str(i)),
                )
                outcome = outcomes.setdefault(reply.pool, Outcome(reasons=Counter()))
                outcome.judgements += 1
                outcome.calls += len(judged.call_keys)
                outcome.unscored += judged.score is None
                outcome.wrong += judged.score is not None and judged.score != reply.label
                assert outcome.reasons is not None
                outcome.reasons[judged.reading] += 1
            backend.close()
    finally:
        judging.read_score = original
    return outcomes


def pools(args: argparse.Namespace) -> Iterator[list[Reply]]:
    yield written_pool()
    for path in args.replies:
        yield file_pool(path, args.limit)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replies", type=Path, action="append", default=[])
    parser.add_argument("--limit", type=int, default=300, help="replies per family from each file")
    args = parser.parse_args(argv)
    old = baseline_extractor()
    before_read: Callable[[str, str], ScoreReading] = lambda text, metric: old.extract_score(  # noqa: E731
        text, old.Scale(1, 5), labels=(metric,)
    )
    after_read: Callable[[str, str], ScoreReading] = judging.read_score
    print(f"{'pool':<62} {'judgements':>10} {'calls/judgement':>21} {'unscored':>15} {'wrong':>11}")
    for pool in pools(args):
        before, after = run(pool, before_read), run(pool, after_read)
        for name in before:
            b, a = before[name], after[name]
            calls = f"{b.calls / b.judgements:>9.3f} -> {a.calls / a.judgements:<9.3f}"
            print(
                f"{name[:62]:<62} {b.judgements:>10} {calls}"
                f" {b.unscored:>6} -> {a.unscored:<6} {b.wrong:>4} -> {a.wrong:<4}"
            )
            assert a.reasons is not None
            print(f"{'':<4}after, read as: " + ", ".join(f"{r}={n}" for r, n in a.reasons.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
