"""`judgeloop diff` at the paper's scale: the scale bench's experiment (133 AnnoMI interviews, the
paper's design) against itself with one judge option changed, timed as a user runs it.

    .venv/bin/python bench/diff_scale.py              # 133 interviews; prints the diff's wall times
    .venv/bin/python bench/diff_scale.py --items 20 --keep /tmp/diffs

Both runs are recorded in this process first (not timed), with the fake model the scale bench
serves (pipeline.testing.judge_responder: assessments that improve after feedback, judge scores
sometimes low, sometimes missing and re-asked), made to depend on its sampling options as a real
model does: run B asks at temperature 0.7 where A asked at 0, and a quarter of its judge replies
(chosen by a digest of the request) state another score. Then `judgeloop diff A B` runs as a user
runs it, a fresh process from the project's folder: text, --json and --html, each timed. The
corpus is AnnoMI in the DAIC-WOZ layout (../shared/corpora/annomi/daic_format_derived, or
JUDGELOOP_SHARED); without it the bench says so and stops.

Measured 2026-11-26 on the shared 2-core development machine under heavy load (load average 24-27,
eight engineers' test suites), 133 interviews, 887 judgements paired, 210 changed (all "sampling"):

    judgeloop diff (text)       9.04, 10.16, 16.04 s     --json  9.57, 10.92, 12.05 s
    --html (4.2 MB page)        11.76, 12.76, 13.61 s
    of which importing the judgeloop command: 9.28 s (scipy.stats, which `calibrate` imported at the
    command's start, was most of it: every judgeloop command paid it)
    the diff itself, in process with its imports done: 1.00 s

Wall time on a loaded machine is mostly the others' load, so the bench now reports CPU time (user +
system of the command's process). After the commands became lazy (pipeline.tools.cli.COMMANDS: each
imported when it runs; tests/test_cli_imports.py), same runs, load average 8-11, CPU seconds:

                                before (main c4440ba)   after
    judgeloop diff (text)       2.06, 1.94              0.79, 0.74 (bench: 0.82, 0.81, 0.86)
    --json                      1.86, 1.99              0.72, 0.69 (bench: 0.86, 0.85, 0.83)
    --html                      2.37, 2.20              0.87, 0.94 (bench: 1.06, 0.99, 0.98)
    import pipeline.tools.cli   1.49, 1.48              0.21, 0.19 (no scipy, numpy, jinja2, dvc)
    judgeloop --help            1.56, 1.44              0.30, 0.30
    the diff in process, imports done                   0.27

Before the diff verified only the calls it uses, hashing every record of both runs (3,825 calls)
was most of its own time: 8.4 s in process under load 12, 5.0 s after (profiled, cProfile).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.data.jsonl import write_jsonl
from pipeline.data.transcripts import load_transcripts
from pipeline.experiments.paper.assess import run_assess
from pipeline.experiments.paper.judge import run_judge
from pipeline.experiments.paper.params import load_paper_params
from pipeline.experiments.paper.refine import run_refine
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.session import open_session
from pipeline.llm.types import ChatRequest
from pipeline.testing.judge_responder import experiment_responder

ROOT = Path(__file__).resolve().parents[1]
SCORE = re.compile(r"Score: (\d)")


def corpus() -> Path:
    shared = Path(os.environ.get("JUDGELOOP_SHARED", ROOT.parent / "shared"))
    return shared / "corpora" / "annomi" / "daic_format_derived"


def sampled(request: ChatRequest) -> str:
    """The experiment responder; away from temperature 0, a quarter of the judge's scores move."""
    data = request.model_dump(mode="json")
    text = experiment_responder(data)
    found = SCORE.search(text)
    if found and request.options.temperature > 0:
        digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).digest()
        if digest[0] % 4 == 0:
            text = text.replace(found.group(0), f"Score: {int(found.group(1)) % 5 + 1}")
    return text


def record(root: Path, items: int | None, temperature: float) -> None:
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    params["llm"].update(backend="fake", model="scale-fake")
    params["llm"]["options"]["temperature"] = temperature
    params["data"].update(transcripts=str(corpus()), limit=items)
    params["assess"]["output"] = params["judge"]["output"] = "text"  # the paper's protocol, as bench/scale.py
    root.mkdir(parents=True)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    settings = load_paper_params(root / "params.yaml")
    transcripts = load_transcripts(settings.data, root)
    by_id = {t.item_id: t for t in transcripts}
    fake = FakeBackend(sampled, name="scale-fake")

    def stage(name: str) -> Any:
        return open_session(settings, name, root=root, backend_factory=lambda: fake)

    session = stage("assess")
    assessments = run_assess(settings, session, transcripts)
    session.close()
    session = stage("judge")
    judgements = run_judge(settings, session, by_id, assessments)
    session.close()
    session = stage("refine")
    refinements = run_refine(settings, session, by_id, {a.item: a for a in assessments}, judgements)
    session.close()
    write_jsonl(root / settings.assess.out, assessments)
    write_jsonl(root / settings.judge.out, judgements)
    write_jsonl(root / settings.refine.out, refinements)


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(
    args: list[str], command: tuple[str, ...] = ("-m", "pipeline.tools.cli", "diff")
) -> tuple[float, str]:
    """The CPU time (user + system) of `python <command> <args>` in a fresh process: on a shared,
    loaded machine the wall time measures the others' load as much as the command."""
    cpu = _children_cpu()
    done = subprocess.run(
        [sys.executable, *command, *args], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return _children_cpu() - cpu, done.stdout


def in_process(args: list[str]) -> float:
    """The diff's own time (CPU): the command run in this process, its imports already loaded."""
    from click.testing import CliRunner

    from pipeline.tools.cli import main as judgeloop

    CliRunner().invoke(judgeloop, ["diff", *args])  # warm: the designs' modules imported
    started = time.process_time()
    result = CliRunner().invoke(judgeloop, ["diff", *args])
    assert result.exit_code == 0, result.output
    return time.process_time() - started


@click.command()
@click.option("--items", type=int, default=None, help="Interviews (default: all 133).")
@click.option("--keep", type=click.Path(path_type=Path), help="Keep the two runs here.")
@click.option("--repeat", type=int, default=3, show_default=True)
def main(items: int | None, keep: Path | None, repeat: int) -> None:
    if not corpus().is_dir():
        raise click.ClickException(f"no AnnoMI corpus at {corpus()} (set JUDGELOOP_SHARED)")
    with tempfile.TemporaryDirectory(prefix="judgeloop-diff-bench-") as tmp:
        base = keep or Path(tmp)
        a, b = base / "a", base / "b"
        started = time.perf_counter()
        record(a, items, 0.0)
        record(b, items, 0.7)
        print(f"recorded both runs in {time.perf_counter() - started:.1f} s (not part of the diff's time)")
        args = [str(a), str(b), "--design", "paper"]
        for label, extra in (
            ("text", []),
            ("--json", ["--json"]),
            ("--html", ["--html", str(base / "page")]),
        ):
            times = []
            for _ in range(repeat):
                seconds, out = timed([*args, *extra])
                times.append(seconds)
            print(f"judgeloop diff {label:<7} " + ", ".join(f"{t:.2f}" for t in times) + " s of CPU")
            if label == "--json":
                found = json.loads(out)
                causes: dict[str, int] = {}
                for change in found["changes"]:
                    causes[change["cause"]] = causes.get(change["cause"], 0) + 1
                paired = sum(m["paired"] for m in found["metrics"])
                print(f"  {paired} judgements paired, {len(found['changes'])} changed, causes {causes}")
        imports = [timed([], ("-c", "import pipeline.tools.cli"))[0] for _ in range(repeat)]
        print("importing the judgeloop command: " + ", ".join(f"{t:.2f}" for t in imports) + " s of CPU")
        print(f"in this process, imports done: {in_process(args):.2f} s of CPU")
        print(timed(args)[1])


if __name__ == "__main__":
    main()
