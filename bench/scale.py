"""The default experiment at the paper's scale against fake Ollama servers, through `dvc repro`:
how close the whole run comes to what the servers could do.

    .venv/bin/python bench/scale.py                    # 133 AnnoMI interviews, one 4-slot server
    .venv/bin/python bench/scale.py --servers 4,4,2    # a pool of three (llm.servers)
    .venv/bin/python bench/scale.py --in-process       # the three LLM stages alone, no DVC, no processes
    .venv/bin/python bench/scale.py --in-process --runner  # ... as the stage runner runs each
    .venv/bin/python bench/scale.py --fixed --median 0.1   # every reply 100 ms exactly

The corpus is AnnoMI in the DAIC-WOZ layout (../shared/corpora/annomi/daic_format_derived, or
JUDGELOOP_SHARED); without it the bench says so and stops. Every server is a FakeOllama in a
process of its own (as Ollama is), answering with the experiment responder (assessments that
improve after feedback, judge scores that are sometimes low and sometimes missing, so that the
feedback loop and the re-asks run), each reply after a latency drawn from a log-normal
distribution (median 80 ms, sigma 0.5: mean 91 ms, p99 0.26 s), the draw seeded by the request,
so every run of the bench meets the same latencies.

Ideal: the servers' busy time spread over all their slots, sum(latency) / slots, as if every slot
were busy from the first call to the last and nothing else took any time. The run is the wall time
of `dvc repro aggregate` in a fresh git + DVC project configured as this repository's .dvc/config
(analytics off; before 2026-11-26's fast-f, `dvc init`'s default: a usage report at DVC's exit)
(stage processes, DVC's hashing and locking, the aggregate stage's report included), with a cold
cache; "through refine" stops when the last LLM stage has ended (aggregate, which calls no model,
starts). Each stage's line gives its share: from DVC's "Running stage" line to the next, the calls
its servers answered in that time, and the fraction of the slots it kept busy; below it, how long
each LLM stage took to send its first request, and how long after its last reply the next stage
started (the stage process's start-up and end, and DVC's hashing and locking between them).
--in-process runs the three LLM stages one after another in the bench's own process, without DVC:
what the item runner reaches on its own; with --runner, each as `python -m stages` runs it (inputs
read from the earlier stages' files, the dry run for the progress line, results and recordings
written), still in this process: a stage without its process's start and DVC. Both give the lost
time table: per stage, "head" to its first generation, then idle slot-seconds over the slots in
its "ramp" (until every slot first generates at once), "body" (until the last moment every slot
did) and "drain" (to its last reply), and "after" its last reply.

Measured 2026-11-25 on the 2-core development machine, shared (load average 0.9-2.6 unless said),
133 interviews, 1,191 model calls, 106.0 s of generation at the default 80 ms median:

    one 4-slot server, ideal 26.50 s          whole run            through refine
      this code (4 runs)                      85.0, 85.2, 85.0, 85.2 %   88.9-89.1 %
      before the shared side-by-side threads and the one-item dry run (2 runs)
                                              82.4, 83.3 %         86.2, 87.0 %
      before issue 24 (6435b8d, interleaved)  84.0, 82.1, 80.7 %   87.9, 85.9, 86.5 %
      --in-process (load 3.6-4.2)             96.4 % (before: 95.2 %)
    three servers, 4 + 4 + 2 slots, ideal 10.60 s
      through DVC                             67.7, 68.7 % (15.4 s)   74.2, 75.3 %
      (before the two changes above: 62.0 %, 17.10 s)
      --in-process                            90.1 % (11.77 s)
    --median 0.5 (replies of 500 ms, 662.6 s of generation)
      one 4-slot server, ideal 165.65 s       96.1 %               96.9 %
      three servers, 4 + 4 + 2, ideal 66.26 s 89.7 %               91.5 %

Measured 2026-11-26, --fixed --median 0.1 (every reply 100 ms; ideal 29.77 s), load 9-17: main
70.0 % (77.8 % through refine), issue 31's branch 68.5, 72.1 % (79.5 %); replayed 14.7 s -> 12.3 s.

Where the rest goes, one server: DVC's start-up 0.63-0.97 s; each LLM stage 0.37-0.79 s from DVC
starting it to its first request (Python and the imports, about 0.35 s; its inputs; the dry run
that predicts its calls for the progress line, 0.3-0.4 s for judge at 133 items; on the first
miss, the other stages' recordings read and verified, 0.17 s for refine) and 0.13-0.33 s from its
last reply to the next stage (its recording and results written, DVC hashing and locking); the
report stage 1.35-1.5 s (133 item pages; it reads and verifies the recordings twice, once for the
counts and once for the pages); and the tails of the stages (in process: assess 91 %, judge 98 %,
refine 96 % of the slots busy). These are fixed costs, about 5 s a run, so three servers finish
2.0 times sooner through DVC with 80 ms replies, 2.3 times in process, and 2.3 times through
DVC with 500 ms replies, where 2.5 is ideal. The dry run used to take 0.8-1.4 s for judge:
eight items at once, with a new thread and a new cache connection for each of an item's four
metrics, only took turns at the interpreter. On the same machine under load (load average 5-6:
other test suites) the fixed costs grow with contention: 76-83 % of ideal on one server.

Measured 2026-11-26 (issue 31, branch fast-d), one 4-slot server, --no-replay, the machine shared
(load average 8-13 throughout; the bench's session given the CPU first with `echo -15 >
/proc/self/autogroup`, since the kernel's autogroups make the others' `nice -n 19` no help to it),
main (3133d3d) and the branch one after the other, two runs each:

                                  main 3133d3d            fast-d                  dd6b5d2 (11-25's 85.0 %)
    --fixed --median 0.1          80.7, 81.9 %            83.7, 84.3 %            81.2 % (one run)
      through refine              85.1, 86.3 %            87.5, 88.3 %            85.6 %
    log-normal, median 80 ms      80.1, 78.5 %            81.1, 81.7 %            79.4, 80.6 %
      through refine              84.9, 83.0 %            85.3, 86.3 %            84.0, 85.4 %
    CPU of DVC and its stages     10.2-11.4 s             9.2-10.6 s

The code of 2026-11-25 measures as main does today: the 85.0 % then and 81.9 % last session were the
machine, not a regression. Where each stage's time beyond its ideal (its generation over the four
slots) goes, seconds of wall (fixed 100 ms, main -> branch; the columns are this bench's): "head",
from DVC starting the stage to its first generation; "unfed", slots idle while the stage still had
requests to start; "drain", its last requests, fewer than the slots; "after", its last reply to
DVC starting the next stage:

    stage          wall            head           unfed          drain   after
    dvc start-up   0.88 -> 0.87    0.88 -> 0.87
    assess         4.28 -> 4.19    0.54 -> 0.49   0.06 -> 0.07   0.07    0.28 -> 0.24
    judge          16.92 -> 16.27  1.06 -> 0.54   0.25 -> 0.15   0.01    0.30 -> 0.28
    refine         12.43 -> 12.38  0.65 -> 0.60   0.12 -> 0.07   0.05    0.46 -> 0.51
    aggregate      1.86 -> 1.61    (all of it)
    all            36.37 -> 35.32  5.00 -> 4.11   0.43 -> 0.29   0.12    1.04 -> 1.03

What was cut: each LLM stage's dry run (for its progress line) no longer holds the model up: it
runs in a thread and, once it meets a call for the model, the step starts for real (judge's head
1.06 -> 0.54 s); the report stage reads the three recordings once instead of three times, takes
the stages' memo of recordings verified before, and imports numpy only for judge.samples > 1
(1.5-1.65 -> 1.17-1.22 s alone). Left, about 6 s a run: DVC's start (0.9 s), each stage's start
(Python, imports, inputs, on its first miss the other stages' recordings read and verified: about
0.5 s each), DVC's hashing and locking between stages (0.25-0.5 s each), the report (1.6 s), and
the slots idle within stages (0.3-0.5 s). That floor is why 90 % at 80 ms (26.5 s of ideal: 2.9 s
of overhead allowed) is out of reach through `dvc repro` and a process per stage on this machine.
`--judgeloop` runs `judgeloop repro aggregate` instead (its server pre-flight and index refresh
cost more than its lock writer saves here: 77.2 %, 85.4 % through refine, one run).

Measured 2026-11-26 (issue 31, branch fast-e), one 4-slot server, --no-replay, load 0.8-3.6, the
session given the CPU first; main (6c10393) against the branch, whose one change here is
ruamel.yaml.clib (DVC's YAML loads in C: its start-up 0.81 -> 0.73 s), runs alternating:

                                  main 6c10393                 fast-e
    --fixed --median 0.1          85.2, 84.7, 85.2, 84.9 %     85.1, 85.6, 85.8, 85.4 %
      through refine              88.9-89.3 %                  89.2-89.8 %
    log-normal, median 80 ms      82.8, 84.0, 83.1, 82.5 %     82.4, 84.2, 82.8, 83.2 %
      through refine              87.2-88.1 %                  86.9-88.8 %

Fixed 100 ms reaches 85 % on a machine this quiet (fast-d's 83.7-84.3 % was at load 8-13). At the
log-normal 80 ms the run spends 5.4 s beyond its ideal where 90 % allows 2.9 s: DVC's start 0.74,
the LLM stages' heads 1.65, their slots unfed or draining 0.53, the gaps after them 0.85 (DVC's
pure-Python rewrite of dvc.lock alone 0.2 s a stage), aggregate 1.61 (bench/README.md).
`--profile` profiles DVC too (.judgeloop/profile-dvc.prof).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import click
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import ServerProcess
from pipeline.testing.fake_ollama import FakeOllama
from pipeline.testing.judge_responder import experiment_responder

ROOT = Path(__file__).resolve().parents[1]

# The median latency: --median sets it, through the environment for the servers' own processes.
MEDIAN_S, SIGMA = float(os.environ.get("JUDGELOOP_BENCH_MEDIAN_S", "0.08")), 0.5
FIXED = os.environ.get("JUDGELOOP_BENCH_FIXED") == "1"  # --fixed: every reply takes the median


def latency(request: dict[str, Any]) -> float:
    """A log-normal draw, seeded by the request: the same request takes the same time in every run
    (--fixed: the median, every time)."""
    if FIXED:
        return MEDIAN_S
    seed = hashlib.sha256(json.dumps(request.get("messages"), sort_keys=True).encode()).digest()
    return random.Random(seed).lognormvariate(math.log(MEDIAN_S), SIGMA)


def corpus() -> Path:
    shared = Path(os.environ.get("JUDGELOOP_SHARED", ROOT.parent / "shared"))
    return shared / "corpora" / "annomi" / "daic_format_derived"


def serve(slots: int, conn: Connection) -> None:
    arrived: list[float] = []
    answered: list[float] = []
    generated: list[tuple[float, float]] = []  # each reply's slot time: (began, ended)

    def timed_latency(request: dict[str, Any]) -> float:
        arrived.append(time.time())
        return latency(request)

    def timed_responder(request: dict[str, Any]) -> str:
        now = time.time()
        answered.append(now)
        generated.append((now - latency(request), now))  # the pause just ended took latency(request)
        return experiment_responder(request)

    with FakeOllama(responder=timed_responder, latency=timed_latency, parallel_slots=slots) as server:
        conn.send(server.url)
        while (asked := conn.recv()) is not None:
            if asked == "times":
                conn.send((arrived, answered))
            elif asked == "slots":
                usage = resource.getrusage(resource.RUSAGE_SELF)
                conn.send((generated, usage.ru_utime + usage.ru_stime))
            else:
                conn.send((server.requests_to("/api/chat"), server.busy_s))


class SlotServer(ServerProcess):
    """One fake Ollama with `slots` slots, in a process of its own."""

    def __init__(self, slots: int) -> None:
        super().__init__(serve, slots)
        self.slots = slots

    def times(self) -> tuple[list[float], list[float]]:
        """When each chat request arrived, and when each was answered (time.time())."""
        arrived, answered = self.ask("times")
        return arrived, answered

    def slot_times(self) -> tuple[list[tuple[float, float]], float]:
        """Each reply's generation (began, ended), time.time(); and the server process's CPU seconds."""
        generated, cpu = self.ask("slots")
        return [(float(a), float(b)) for a, b in generated], float(cpu)

    def served(self) -> tuple[int, float]:
        """(calls answered, seconds of generation)."""
        calls, busy = self.ask("count")
        return int(calls), float(busy)


def llm_params(servers: list[SlotServer]) -> dict[str, Any]:
    llm: dict[str, Any] = {"backend": "ollama", "model": "test-model", "options": {"num_ctx": 32768}}
    if len(servers) == 1:
        llm.update(base_url=servers[0].url, parallelism=servers[0].slots)
    else:
        llm["servers"] = [{"base_url": s.url, "parallelism": s.slots} for s in servers]
    return llm


# --profile: each stage as DVC runs it, under cProfile (wall clock, imports included), its profile
# left in .judgeloop/profile-<stage>.prof of the --keep folder.
PROFILED = """import cProfile, os, sys, time
began = time.perf_counter()
profiler = cProfile.Profile()
profiler.enable()
sys.argv = ["stages", *sys.argv[1:]]
try:
    from stages.runner import main
    main()
except SystemExit as done:
    if done.code not in (0, None):
        raise
profiler.disable()
os.makedirs(".judgeloop", exist_ok=True)
mode = os.environ.get("JUDGELOOP_CACHE_MODE", "params")
profiler.dump_stats(f".judgeloop/profile-{sys.argv[-1]}-{mode}.prof")
"""


# --trace: each stage as DVC runs it, its process's start (the kernel's, to about 10 ms), its exit
# (os._exit, or the interpreter's end) and its CPU written to .judgeloop/trace.jsonl (a process
# that ends some other way leaves no line). Not with --judgeloop: warm stages run only the exact
# `python -m stages ARGS` command.
TRACED = """import atexit, json, os, resource, sys, time
def started():
    ticks = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19])
    uptime = float(open("/proc/uptime").read().split()[0])  # btime is whole seconds: too coarse
    return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")
def ended(code=0):
    usage = resource.getrusage(resource.RUSAGE_SELF)
    line = {"stage": sys.argv[-1], "start": started(), "end": time.time(), "code": code,
            "user": usage.ru_utime, "sys": usage.ru_stime}
    os.makedirs(".judgeloop", exist_ok=True)
    with open(".judgeloop/trace.jsonl", "a") as out:
        out.write(json.dumps(line) + "\\n")
real_exit = os._exit
def traced_exit(code):
    ended(code)
    real_exit(code)
os._exit = traced_exit
atexit.register(ended)
import runpy
sys.argv = ["stages", *sys.argv[1:]]
runpy.run_module("stages", run_name="__main__", alter_sys=True)
"""


def project(
    root: Path, servers: list[SlotServer], items: int | None, profile: bool = False, trace: bool = False
) -> None:
    for name in ("pipeline", "stages"):
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("dvc.yaml", ".dvcignore"):
        shutil.copy(ROOT / name, root / name)
    for wanted, script, text in (
        (profile, "profiled_stage.py", PROFILED),
        (trace, "traced_stage.py", TRACED),
    ):
        if wanted:
            (root / script).write_text(text)
            dvc_yaml = (root / "dvc.yaml").read_text()
            (root / "dvc.yaml").write_text(
                dvc_yaml.replace("cmd: python -m stages ", f"cmd: python {script} ")
            )
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["llm"].update(llm_params(servers))
    params["data"].update(transcripts=str(corpus()), limit=items)
    params["assess"]["output"] = params["judge"]["output"] = "text"  # the paper's protocol
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    # Byte-code compiled once, as in a checkout that has run before: the first stage would
    # otherwise compile every module it imports, a one-off cost that is no stage's overhead.
    compiled = [sys.executable, "-m", "compileall", "-q", "pipeline", "stages"]
    for args in (["git", "init", "-q"], [sys.executable, "-m", "dvc", "init", "-q"], compiled):
        subprocess.run(args, cwd=root, check=True)
    # DVC configured as the repository is (.dvc/config: analytics off). `dvc init`'s default sends
    # a usage report at the end of every command: 0.1-0.3 s of collecting and a process started,
    # which a run of this repository does not pay.
    shutil.copy(ROOT / ".dvc" / "config", root / ".dvc" / "config")


@dataclass
class Mark:
    at: float  # seconds since the run started
    stage: str
    calls: int
    busy: float
    wall: float = 0.0  # time.time() then


def served(servers: list[SlotServer]) -> tuple[int, float]:
    counts = [s.served() for s in servers]
    return sum(c for c, _ in counts), sum(b for _, b in counts)


def run_dvc(
    root: Path, servers: list[SlotServer], *args: str, **env_vars: str
) -> tuple[float, list[Mark], float]:
    """`dvc repro aggregate`, its stages' starts marked as DVC announces them."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **env_vars}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_before = before.ru_utime + before.ru_stime
    started = time.perf_counter()
    marks = [Mark(0.0, "dvc start-up", 0, 0.0, time.time())]
    # --judgeloop: `judgeloop repro` (DVC in its process, with judgeloop's lock writer), as the
    # README runs the pipeline; by default DVC's own command.
    # (bench/dvc_timeline.py: DVC through a launcher that times its phases, JUDGELOOP_BENCH_DVC.)
    dvc = os.environ.get("JUDGELOOP_BENCH_DVC", "dvc")
    command = ["pipeline.tools.cli"] if os.environ.get("JUDGELOOP_BENCH_VIA") == "judgeloop" else [dvc]
    with subprocess.Popen(
        [sys.executable, "-m", *command, "repro", *args, "aggregate"],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as process:
        assert process.stdout is not None
        log = []
        for line in process.stdout:
            log.append(line)
            if line.startswith("Running stage '"):
                stage = line.split("'")[1]
                marks.append(Mark(time.perf_counter() - started, stage, *served(servers), time.time()))
        if process.wait() != 0:
            raise SystemExit("".join(log))
    elapsed = time.perf_counter() - started
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    click.echo(
        f"dvc repro {' '.join(args)}: {elapsed:.2f} s wall, "
        f"{children.ru_utime + children.ru_stime - cpu_before:.1f} s CPU (DVC and its stages), "
        f"load {Path('/proc/loadavg').read_text().split()[0]}"
    )
    marks.append(Mark(elapsed, "end", *served(servers), time.time()))
    return elapsed, marks, children.ru_utime + children.ru_stime - cpu_before


def gaps(marks: list[Mark], servers: list[SlotServer]) -> None:
    """Per stage: from DVC's announcement to its first request, and from its last reply to the next."""
    arrived = sorted(t for s in servers for t in s.times()[0])
    answered = sorted(t for s in servers for t in s.times()[1])
    for mark, after in itertools.pairwise(marks[1:]):
        inside = [t for t in arrived if mark.wall <= t < after.wall]
        done = [t for t in answered if mark.wall <= t < after.wall]
        if inside and done:
            click.echo(
                f"  {mark.stage}: first request {inside[0] - mark.wall:.2f} s after DVC started it, "
                f"next stage {after.wall - done[-1]:.2f} s after its last reply"
            )


def idle_slot_seconds(spans: list[tuple[float, float]], start: float, end: float, slots: int) -> float:
    """Slot-seconds left idle in [start, end], given the generations' (began, ended) spans."""
    events = sorted(
        [(max(a, start), 1) for a, b in spans if b > start and a < end]
        + [(min(b, end), -1) for a, b in spans if b > start and a < end]
    )
    idle, busy, at = 0.0, 0, start
    for when, step in events:
        idle += max(0, slots - busy) * (when - at)
        busy, at = busy + step, when
    return idle + max(0, slots - busy) * (end - at)


def full_span(spans: list[tuple[float, float]], slots: int) -> tuple[float, float] | None:
    """The first and the last moment every slot was generating (None: never all at once)."""
    events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans], key=lambda e: (e[0], -e[1]))
    busy, first, last = 0, None, None
    for when, step in events:
        if busy >= slots and step < 0:
            last = when  # the slots were all busy until now
        busy += step
        if busy >= slots and first is None:
            first = when
    return (first, last) if first is not None and last is not None else None


def lost_time(marks: list[Mark], servers: list[SlotServer]) -> None:
    """Per stage, where the wall time beyond its ideal (its generation over every slot) went, in
    seconds of wall (idle slot-seconds / slots): "head", before its first generation began (DVC,
    the stage's start-up, its inputs, its first prompts); "ramp", from its first generation until
    every slot was generating at once (the first items' calls still being made); "body", slots idle
    between then and the last moment every slot was generating (the client not keeping them fed);
    "drain", from that moment to its last reply (too few calls left to fill the slots: the last
    items, refine's last chains); "after", from its last reply to the next stage (writing, the
    process's end, DVC's hashing and locking)."""
    slots = sum(s.slots for s in servers)
    spans: list[tuple[float, float]] = []
    cpu = 0.0
    for server in servers:
        generated, used = server.slot_times()
        spans += generated
        cpu += used
    names = ("wall", "ideal", "head", "ramp", "body", "drain", "after")
    click.echo(
        f"{'stage':14s} "
        + " ".join(f"{n:>6s}" for n in names)
        + "  (s; ramp/body/drain: idle slot-s / slots)"
    )
    totals = [0.0] * len(names)
    for mark, after in itertools.pairwise(marks):
        inside = sorted((a, b) for a, b in spans if mark.wall <= a < after.wall)
        wall = after.wall - mark.wall
        ideal = sum(b - a for a, b in inside) / slots
        if inside:
            first, last_end = inside[0][0], max(b for _, b in inside)
            full_from, full_to = full_span(inside, slots) or (last_end, last_end)
            ramp = idle_slot_seconds(inside, first, full_from, slots) / slots
            body = idle_slot_seconds(inside, full_from, full_to, slots) / slots
            drain = idle_slot_seconds(inside, full_to, last_end, slots) / slots
            row = [wall, ideal, first - mark.wall, ramp, body, drain, after.wall - last_end]
        else:
            row = [wall, ideal, wall, 0.0, 0.0, 0.0, 0.0]
        totals = [t + r for t, r in zip(totals, row, strict=True)]
        click.echo(f"{mark.stage:14s} " + " ".join(f"{v:6.2f}" for v in row))
    click.echo(f"{'all':14s} " + " ".join(f"{v:6.2f}" for v in totals))
    click.echo(f"  the servers' CPU: {cpu:.1f} s")


def timeline(root: Path, marks: list[Mark], servers: list[SlotServer], cpu: float) -> None:
    """--trace: each stage's wall split at its process's start and exit and its first request and
    last reply (time.time()), and each stage process's CPU; what is left of the CPU is DVC's."""
    traced = {
        line["stage"]: line
        for line in map(json.loads, (root / ".judgeloop" / "trace.jsonl").read_text().splitlines())
    }
    arrived = sorted(t for s in servers for t in s.times()[0])
    answered = sorted(t for s in servers for t in s.times()[1])
    click.echo(
        f"{'stage':10s} {'dvc before':>10s} {'head':>6s} {'calls':>6s} {'close':>6s} {'stage':>6s}"
        f" {'dvc after':>9s} {'CPU':>5s}   (seconds; stage = process start to exit)"
    )
    stage_cpu = 0.0
    for mark, after in itertools.pairwise(marks[1:]):
        line = traced.get(mark.stage)
        if line is None:
            continue
        inside = [t for t in arrived if mark.wall <= t < after.wall]
        done = [t for t in answered if mark.wall <= t < after.wall]
        first, last = (inside[0], done[-1]) if inside and done else (line["start"], line["start"])
        cpu_s = line["user"] + line["sys"]
        stage_cpu += cpu_s
        click.echo(
            f"{mark.stage:10s} {line['start'] - mark.wall:10.2f} {first - line['start']:6.2f}"
            f" {last - first:6.2f} {line['end'] - last:6.2f} {line['end'] - line['start']:6.2f}"
            f" {after.wall - line['end']:9.2f} {cpu_s:5.2f}"
        )
    click.echo(f"  CPU: the stage processes {stage_cpu:.2f} s, DVC {cpu - stage_cpu:.2f} s")


def run_through_runner(root: Path, servers: list[SlotServer]) -> tuple[float, list[Mark]]:
    """--in-process --runner: the three LLM stages as `python -m stages` runs them (inputs read from
    the earlier stages' files, the dry run for the progress line, results and recordings written),
    one after the other in this process: a stage without its process's start or DVC."""
    from stages.runner import run_stage

    os.chdir(root)
    started = time.perf_counter()
    marks: list[Mark] = []
    for name in ("assess", "judge", "refine"):
        marks.append(Mark(time.perf_counter() - started, name, *served(servers), time.time()))
        run_stage("paper", name)
    elapsed = time.perf_counter() - started
    marks.append(Mark(elapsed, "end", *served(servers), time.time()))
    return elapsed, marks


def run_in_process(root: Path, servers: list[SlotServer]) -> tuple[float, list[Mark]]:
    """The three LLM stages one after the other in this process: what the loop costs without DVC."""
    from pipeline.data.transcripts import load_transcripts
    from pipeline.experiments.paper.assess import run_assess
    from pipeline.experiments.paper.judge import run_judge
    from pipeline.experiments.paper.params import load_paper_params
    from pipeline.experiments.paper.refine import run_refine
    from pipeline.llm.session import open_session

    params = load_paper_params(root / "params.yaml")
    transcripts = load_transcripts(params.data, root)
    by_id = {t.item_id: t for t in transcripts}
    started = time.perf_counter()
    marks: list[Mark] = []

    def stage(name: str, work: Any) -> Any:
        marks.append(Mark(time.perf_counter() - started, name, *served(servers), time.time()))
        session = open_session(params, name, root=root)
        try:
            return work(session)
        finally:
            session.close()

    assessments = stage("assess", lambda s: run_assess(params, s, transcripts))
    judgements = stage("judge", lambda s: run_judge(params, s, by_id, assessments))
    stage("refine", lambda s: run_refine(params, s, by_id, {a.item: a for a in assessments}, judgements))
    elapsed = time.perf_counter() - started
    marks.append(Mark(elapsed, "end", *served(servers), time.time()))
    return elapsed, marks


def report(elapsed: float, marks: list[Mark], slots: int) -> None:
    calls, busy = marks[-1].calls, marks[-1].busy
    ideal = busy / slots
    click.echo(f"{calls} model calls, {busy:.1f} s of generation over {slots} slots")
    click.echo(f"{'stage':14s} {'wall s':>7s} {'calls':>6s} {'slots busy':>10s}")
    for mark, after in itertools.pairwise(marks):
        span = after.at - mark.at
        used = (after.busy - mark.busy) / (slots * span) if span else 0.0
        click.echo(f"{mark.stage:14s} {span:7.2f} {after.calls - mark.calls:6d} {used:10.0%}")
    click.echo(f"run {elapsed:.2f} s, ideal {ideal:.2f} s: {ideal / elapsed:.1%} of ideal")
    last = next((m for m in marks if m.stage == "aggregate"), None)
    if last is not None:  # the report stage calls no model: the calls were all answered when it began
        click.echo(f"  through refine (every call answered): {last.at:.2f} s, {ideal / last.at:.1%} of ideal")


def measure(
    root: Path,
    processes: list[SlotServer],
    in_process: bool,
    profile: bool,
    trace: bool,
    judgeloop: bool,
    no_replay: bool,
    runner: bool = False,
) -> tuple[float, list[Mark], float | None]:
    """The run (in this process, or through DVC with its gaps, lost time and --trace's timeline),
    then its replay unless --no-replay: the run's seconds and marks, and the replay's seconds."""
    if in_process:
        run = run_through_runner if runner else run_in_process
        elapsed, marks = run(root, processes)
        lost_time(marks, processes)
        return elapsed, marks, None
    # --profile: DVC itself too (its reading of dvc.yaml and dvc.lock, its hashing and locking
    # between stages), in .judgeloop/profile-dvc.prof.
    dumped = ("--cprofile-dump", ".judgeloop/profile-dvc.prof") if profile and not judgeloop else ()
    elapsed, marks, cpu = run_dvc(root, processes, *dumped)
    gaps(marks, processes)
    lost_time(marks, processes)
    if trace and not judgeloop:
        timeline(root, marks, processes, cpu)
    if no_replay:
        return elapsed, marks, None
    replayed, _, _ = run_dvc(root, processes, "--force", JUDGELOOP_CACHE_MODE="replay")
    return elapsed, marks, replayed


@click.command()
@click.option("--servers", default="4", show_default=True, help="Slots of each server, e.g. 4,4,2.")
@click.option("--items", type=int, default=None, help="The first N interviews (default: all 133).")
@click.option("--in-process", is_flag=True, help="The LLM stages in this process, without DVC.")
@click.option(
    "--runner",
    is_flag=True,
    help="With --in-process: each stage as `python -m stages` runs it (dry run, files).",
)
@click.option("--keep", type=click.Path(path_type=Path), help="Leave the project in this new folder.")
@click.option("--median", type=float, default=0.08, show_default=True, help="Median latency of a reply (s).")
@click.option("--fixed", is_flag=True, help="Every reply takes the median exactly (no log-normal spread).")
@click.option("--no-replay", is_flag=True, help="Skip the replay that follows the run.")
@click.option(
    "--judgeloop", is_flag=True, help="Run `judgeloop repro aggregate` rather than `dvc repro aggregate`."
)
@click.option(
    "--trace", is_flag=True, help="Each stage's start, exit and CPU beside its calls (not with --judgeloop)."
)
@click.option(
    "--profile", is_flag=True, help="Each stage and DVC under cProfile (.judgeloop/profile-*.prof; --keep)."
)
def main(
    servers: str,
    items: int | None,
    in_process: bool,
    keep: Path | None,
    median: float,
    fixed: bool,
    profile: bool,
    trace: bool,
    no_replay: bool,
    judgeloop: bool,
    runner: bool,
) -> None:
    global MEDIAN_S, FIXED
    MEDIAN_S, FIXED = median, fixed
    os.environ["JUDGELOOP_BENCH_MEDIAN_S"] = str(median)
    os.environ["JUDGELOOP_BENCH_FIXED"] = "1" if fixed else "0"
    os.environ["JUDGELOOP_BENCH_VIA"] = "judgeloop" if judgeloop else "dvc"
    if not corpus().is_dir():
        click.echo(
            f"skipped: the AnnoMI corpus is not at {corpus()} (../shared is absent; set JUDGELOOP_SHARED)"
        )
        return
    slots = [int(s) for s in servers.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        root = keep or Path(tmp)
        processes = [SlotServer(k) for k in slots]
        for process in processes:
            process.__enter__()
        try:
            project(root, processes, items, profile, trace and not judgeloop)
            n = items or len(list(corpus().glob("*_TRANSCRIPT.csv")))
            ms = f"{MEDIAN_S * 1000:.0f} ms"
            shape = f"latency fixed ({ms})" if FIXED else f"latency log-normal (median {ms})"
            load = Path("/proc/loadavg").read_text().split()[0]
            click.echo(f"{n} interviews, servers with {servers} slots, {shape}, load {load}")
            elapsed, marks, replayed = measure(
                root, processes, in_process, profile, trace, judgeloop, no_replay, runner
            )
        finally:
            for process in processes:
                process.__exit__()
    report(elapsed, marks, sum(slots))
    if replayed is not None:
        click.echo(f"the same stages replayed (every call a cache hit): {replayed:.2f} s")


if __name__ == "__main__":
    main()
