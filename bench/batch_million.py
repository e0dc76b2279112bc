"""Batch rounds at scale: a batch's results file ingested (and, with --ray, answered by the Ray
runner against the fake OpenAI-compatible server), its rate and peak memory at each size.

    nice -n 10 .venv/bin/python bench/batch_million.py --calls 10000 --calls 100000
    nice -n 10 .venv/bin/python bench/batch_million.py --calls 2000 --ray

An export of N judge calls (each prompt holds a 20 kB transcript, one transcript for every ten
calls, as an item's metrics and rounds share one), written in `judgeloop batch export`'s two files
(manifest.jsonl, requests.jsonl), answered line by line as the fake batch runner answers
(pipeline.testing.fake_batch), then `judgeloop batch ingest` in a process of its own: its wall
time and peak memory (wait4's ru_maxrss). Ingest must stream: its memory may grow with the number
of keys (a digest and an offset each), never with the size of the results file. Every line must
be stored (the bench fails otherwise). --ray also times RayRunner.run (requests.jsonl to
results.jsonl through Ray Data, --concurrency at a time) against a FakeOpenAI on loopback in a
process of its own (it keeps no request: the bench measures the runner, not a server sharing its
interpreter); Ray's start and the run are timed apart, with the CPU of Ray's processes.

    nice -n 10 .venv/bin/python bench/batch_million.py --calls 1000000 --prompt-chars 2000 \
        --ray --ingest-ray --dir /tmp/somewhere

export, run, ingest as a batch round chains them: the export written in a process of its own
(its CPU and peak), the Ray runner on a local Ray of --ray-cpus CPUs and an --object-store-mb
object store (each of Ray's processes' CPU and peak RSS read every second), then `judgeloop batch
ingest` of the Ray runner's own results. --prompt-chars sets the transcript's size (20 kB, the
paper's interviews, by default; a million calls at 20 kB are 40 GB of files).

    nice -n 10 .venv/bin/python bench/batch_million.py --calls 100000 --prompt-chars 2000 \
        --real-export --against /path/to/main-checkout --pairs 2 --dir /tmp/somewhere

--real-export times `judgeloop batch export` itself (status's dry run of the paper's design over
N synthetic interviews, pipeline.testing.synthetic: one assessment an interview in the first
round, then the two files) instead of the bench's own writer; with --against, that checkout's
code and this one's alternately, their files required byte-identical (sha256).
Results measured on the shared 2-core machine are in bench/README.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import click
import orjson
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import ServerProcess, judge_request, transcript
from pipeline.llm.backends.openai_compat import OpenAICompatBackend
from pipeline.llm.keys import request_key
from pipeline.llm.settings import LLMSettings
from pipeline.llm.types import ModelIdentity
from pipeline.testing.fake_batch import answer
from pipeline.testing.fake_openai import FakeOpenAI, default_responder
from pipeline.testing.loopback import Received
from pipeline.tools.batch.manifest import BATCH_URL, MANIFEST_FILE, REQUESTS_FILE

ROOT = Path(__file__).resolve().parents[1]
MODEL, DIGEST = "bench-model", "rev-1"


def write_export(root: Path, calls: int, chars: int = 20_000) -> None:
    """params.yaml, and an export of `calls` judge calls in batch export's format, line by line,
    each prompt holding a transcript of `chars` characters (one for every ten calls)."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    params["llm"].update(backend="openai", model=MODEL, digest=DIGEST, base_url="http://127.0.0.1:9")
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    identity = ModelIdentity(backend="openai", name=MODEL, digest=DIGEST)
    backend = OpenAICompatBackend(LLMSettings.model_validate(params["llm"]))
    folder = root / "batch"
    folder.mkdir()
    text, body_text = "", transcript(chars)
    with (folder / REQUESTS_FILE).open("wb") as requests, (folder / MANIFEST_FILE).open("wb") as manifest:
        for i in range(calls):
            if i % 10 == 0:
                text = f"interview {i // 10}\n" + body_text
            request = judge_request(i, text)
            key = request_key(identity, request)
            body = backend.request_body(request)
            requests.write(orjson.dumps({"custom_id": key, "method": "POST", "url": BATCH_URL, "body": body}))
            requests.write(b"\n")
            line = {
                "custom_id": key,
                "model": identity.model_dump(mode="json"),
                "request": request.model_dump(mode="json"),
                "context": f"bench call {i}",
            }
            manifest.write(orjson.dumps(line) + b"\n")
    backend.close()


def answer_all(root: Path) -> None:
    """results.jsonl, as the fake batch runner writes it (one line at a time)."""
    server = FakeOpenAI(models=(MODEL,), responder=default_responder, max_model_len=65536)
    with (root / "batch" / REQUESTS_FILE).open("rb") as lines, (root / "results.jsonl").open("wb") as out:
        for number, raw in enumerate(lines, 1):
            out.write(orjson.dumps(answer(server, orjson.loads(raw), number)) + b"\n")


def measured(args: list[str], cwd: Path, code: Path = ROOT) -> tuple[float, int, float, str, float]:
    """Wall s, peak RSS bytes (the largest process), CPU s (user + system, its descendants too), what
    it said and its system CPU s apart, of judgeloop's code from `code`."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen(args, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
        elapsed = time.perf_counter() - started
        out.seek(0)
        said = out.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise click.ClickException(f"{' '.join(args)} failed:\n{said[-3000:]}")
    return elapsed, usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime, said.strip(), usage.ru_stime


class _CountingOpenAI(FakeOpenAI):
    """A FakeOpenAI that counts what it is sent without keeping it (100k bodies are 2 GB)."""

    def record(self, seen: Received) -> None:
        with self._cond:
            self.requests_total += 1


def serve_fake_openai(conn: Connection) -> None:
    """The fake server in a process of its own (bench.common.ServerProcess): the bench times the
    runner, not a server sharing its interpreter. Answers each message with its count and CPU."""
    server = _CountingOpenAI(models=(MODEL,), responder=default_responder, max_model_len=65536).start()
    conn.send(server.url)
    while conn.recv() is not None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        conn.send({"requests": server.requests_total, "cpu_s": usage.ru_utime + usage.ru_stime})
    server.close()


# RayRunner.run in a process of its own, so that wait4 gives its CPU and peak memory. Ray's own
# processes (GCS, raylet, workers, the senders: Ray Data's MapWorkers) are not all this one's children
# to be waited for: a thread reads each one's CPU and peak RSS (/proc's VmHWM) every second while they
# run, and the sum of their RSS.
# A local Ray of --ray-cpus CPUs and an object store of --object-store-mb (the machine is shared).
RAY_STEP = """
import contextlib, json, resource, sys, threading, time
from pathlib import Path
import psutil, ray
from pipeline.tools.batch.runners import RayRunner

seen = {}  # pid -> [kind, cpu s, peak RSS bytes]
total_rss = [0]
stop = threading.Event()

def kind(p):
    name = p.name()
    if name.startswith("ray::MapWorker"):
        return "sender"
    if name.startswith("ray::"):
        return "worker"
    return name if name in ("raylet", "gcs_server") else "other"

def hwm(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0

def sample():
    rss = 0
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error, OSError):
            times = child.cpu_times()
            # its kind by its latest name: a worker is "python" until it has taken its title
            entry = seen.setdefault(child.pid, ["other", 0.0, 0])
            entry[0] = kind(child)
            entry[1] = times.user + times.system
            entry[2] = max(entry[2], hwm(child.pid))
            rss += child.memory_info().rss
    total_rss[0] = max(total_rss[0], rss)

def sampler():
    while not stop.wait(1.0):
        sample()

ray.init(num_cpus=int(sys.argv[5]), object_store_memory=int(sys.argv[6]) << 20,
         include_dashboard=False, log_to_driver=False)
runner = RayRunner(sys.argv[3], concurrency=int(sys.argv[4]))
thread = threading.Thread(target=sampler, daemon=True)
thread.start()
try:
    started = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_SELF)
    runner.run(Path(sys.argv[1]), Path(sys.argv[2]))
    ran = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_SELF)
    stop.set()
    thread.join()
    sample()
    by_kind = {}
    for name, cpu, peak in seen.values():
        cpu_sum, peak_max, count = by_kind.get(name, (0.0, 0, 0))
        by_kind[name] = (cpu_sum + cpu, max(peak_max, peak), count + 1)
    print(json.dumps({
        "ray_run_s": ran,
        "driver_run_cpu_s": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
        "driver_peak_mb": after.ru_maxrss / 1024,
        "ray_processes_cpu_s": sum(v[0] for v in by_kind.values()),
        "ray_processes_rss_peak_mb": total_rss[0] / 2**20,
        "ray_by_kind": {k: {"cpu_s": round(v[0], 1), "peak_mb": round(v[1] / 2**20), "n": v[2]}
                        for k, v in by_kind.items()},
    }))
finally:
    ray.shutdown()
"""


# Ray starts its workers at the raylet's niceness plus 15 (its worker_niceness): on a machine shared
# with processes at nice 0, a bench at nice 10 had workers at 19, starved for minutes at a time (the
# 1M run stalled at 37 %). The workers keep the bench's niceness unless RAY_worker_niceness says.
WORKER_NICENESS, NICENESS_VAR = "0", "RAY_worker_niceness"


def ray_run(root: Path, concurrency: int, cpus: int = 2, store_mb: int = 1024) -> dict[str, Any]:
    """RayRunner.run over requests.jsonl against a FakeOpenAI on loopback (in a process of its own)."""
    results = root / "ray-results.jsonl"
    os.environ.setdefault(NICENESS_VAR, WORKER_NICENESS)
    # Under load (40 runnable processes on 2 cores) the raylet took longer than Ray's 60 s to register.
    os.environ.setdefault("RAY_raylet_start_wait_time_s", "600")
    with ServerProcess(serve_fake_openai) as server:
        args = [sys.executable, "-c", RAY_STEP, str(root / "batch" / REQUESTS_FILE), str(results)]
        sizes = [str(concurrency), str(cpus), str(store_mb)]
        wall, peak, cpu, said, _ = measured([*args, server.url, *sizes], root)
        served = server.ask("count")
    timings = json.loads(next(line for line in said.splitlines() if line.startswith('{"ray_run_s"')))
    lines = sum(1 for _ in results.open("rb"))
    errors = sum(1 for line in results.open("rb") if b'"response":null' in line)
    return {
        "ray_s": wall,
        **timings,
        "ray_calls_per_s": timings["ray_run_s"] and served["requests"] / timings["ray_run_s"],
        "ray_waited_cpu_s": cpu,
        "ray_waited_peak_mb": peak / 2**20,
        "ray_lines": lines,
        "ray_errors": errors,
        "ray_results_mb": results.stat().st_size / 2**20,
        "ray_worker_niceness": os.environ[NICENESS_VAR],
        "server_requests": served["requests"],
        "server_cpu_s": served["cpu_s"],
    }


EXPORT_STEP = (
    "import sys; from pathlib import Path; from bench.batch_million import write_export; "
    "write_export(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))"
)


def exported(root: Path, calls: int, chars: int) -> dict[str, Any]:
    """The export's two files written in a process of its own: its wall, CPU and peak."""
    step = [sys.executable, "-c", EXPORT_STEP, str(root), str(calls), str(chars)]
    wall, peak, cpu, _, _ = measured(step, root)
    folder = root / "batch"
    return {
        "export_s": wall,
        "export_cpu_s": cpu,
        "export_calls_per_s": calls / wall,
        "export_peak_mb": peak / 2**20,
        "manifest_mb": (folder / MANIFEST_FILE).stat().st_size / 2**20,
        "requests_mb": (folder / REQUESTS_FILE).stat().st_size / 2**20,
    }


def real_project(root: Path, calls: int, chars: int) -> None:
    """The paper's design over `calls` synthetic interviews of `chars` characters each
    (pipeline.testing.synthetic), on the openai backend with a pinned digest and no DVC project:
    its first batch round exports one assessment an interview, each prompt holding its transcript."""
    from pipeline.testing.synthetic import make_project

    make_project(root, calls, chars, ROOT / "params.yaml")
    params = yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8"))
    params["llm"].update(backend="openai", model=MODEL, digest=DIGEST, base_url="http://127.0.0.1:9")
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def real_exported(root: Path, calls: int, code: Path = ROOT, folder: str = "batch") -> dict[str, Any]:
    """`judgeloop batch export` itself (the status dry run's plan, then the files), in a process of
    its own with `code`'s judgeloop: wall, CPU, peak, and the sha256 of the two files."""
    shutil.rmtree(root / folder, ignore_errors=True)
    cli = [sys.executable, "-m", "pipeline.tools.cli", "batch", "export", "--folder", folder]
    wall, peak, cpu, said, _ = measured(cli, root, code)
    if not said.splitlines()[-1].startswith(f"{calls} calls"):
        raise click.ClickException(f"the export did not plan {calls} calls: {said[-2000:]}")
    return {
        "export_s": wall,
        "export_cpu_s": cpu,
        "export_calls_per_s": calls / wall,
        "export_calls_per_cpu_s": calls / cpu,
        "export_peak_mb": peak / 2**20,
        "manifest_sha256": _sha256(root / folder / MANIFEST_FILE),
        "requests_sha256": _sha256(root / folder / REQUESTS_FILE),
        "manifest_mb": (root / folder / MANIFEST_FILE).stat().st_size / 2**20,
        "requests_mb": (root / folder / REQUESTS_FILE).stat().st_size / 2**20,
    }


def export_pairs(root: Path, calls: int, against: Path, pairs: int) -> list[dict[str, Any]]:
    """The real export by `against`'s code and this checkout's, alternately (this one first); the
    files must be byte-identical. Each run printed as it ends."""
    runs = []
    for _ in range(pairs):
        for name, code in (("this", ROOT), ("against", against)):
            run = {
                "code": name,
                "load": os.getloadavg()[0],
                **real_exported(root, calls, code, f"batch-{name}"),
            }
            click.echo(json.dumps(run), err=True)
            runs.append(run)
    if len({(r["manifest_sha256"], r["requests_sha256"]) for r in runs}) != 1:
        raise click.ClickException(f"the exports differ: {json.dumps(runs)}")
    return runs


def ingest_run(root: Path, calls: int) -> dict[str, Any]:
    """The fake batch runner's answers, then `judgeloop batch ingest` in a process of its own."""
    started = time.perf_counter()
    answer_all(root)
    answer_s = time.perf_counter() - started
    return {
        "results_mb": (root / "results.jsonl").stat().st_size / 2**20,
        "answer_s": answer_s,
        **ingested(root, calls),
    }


# `judgeloop batch ingest` with the records' clock pinned (created_at), so that two code versions'
# caches can be compared byte for byte (`cache_digests`): a record's header holds when it was made.
FIXED_CLOCK_CLI = """
import runpy, sys
from datetime import UTC, datetime
import pipeline.llm.records

class Fixed(datetime):
    @classmethod
    def now(cls, tz=None):
        return cls(2026, 1, 1, tzinfo=UTC)

pipeline.llm.records.datetime = Fixed
sys.argv[0] = "judgeloop"
runpy.run_module("pipeline.tools.cli", run_name="__main__", alter_sys=True)
"""


def ingested(
    root: Path, calls: int, code: Path = ROOT, results: str = "results.jsonl", fixed_clock: bool = False
) -> dict[str, Any]:
    """`judgeloop batch ingest` of the answers in a process of its own, into an empty local cache
    (`fixed_clock`: the records' clock pinned, FIXED_CLOCK_CLI)."""
    shutil.rmtree(root / ".judgeloop", ignore_errors=True)
    program = ["-c", FIXED_CLOCK_CLI] if fixed_clock else ["-m", "pipeline.tools.cli"]
    cli = [sys.executable, *program, "batch", "ingest", results, "--folder", "batch"]
    wall, peak, cpu, said, system = measured(cli, root, code)
    if f"{calls} replies stored" not in said:
        raise click.ClickException(f"ingest did not store every reply: {said[-2000:]}")
    return {
        "ingest_s": wall,
        "ingest_cpu_s": cpu,
        "ingest_sys_s": system,
        "ingest_calls_per_s": calls / wall,
        "ingest_peak_mb": peak / 2**20,
        "said": said.splitlines()[-1],
        "cache_mb": sum(f.stat().st_size for f in (root / ".judgeloop").rglob("*") if f.is_file()) / 2**20,
    }


def cache_digests(folder: Path) -> dict[str, str]:
    """sha256 of what a local cache holds, per database (the records', then the blocks'): every row's
    key, mode and value bytes (a value file's bytes where the row names one), in the order stored,
    and apart, sorted by key. diskcache's clocks (store and access times) are left out: they differ
    between any two runs."""
    digests = {}
    for name, db in (("records", folder / "cache.db"), ("blocks", folder / "blocks" / "cache.db")):
        in_order, by_key = hashlib.sha256(), []
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as connection:
            rows = connection.execute("SELECT key, raw, mode, filename, value FROM Cache ORDER BY rowid")
            for key, raw, mode, filename, value in rows:
                data = (db.parent / filename).read_bytes() if filename else value
                row = orjson.dumps([str(key), raw, mode]) + b"\n" + bytes(data) + b"\n"
                in_order.update(row)
                by_key.append((str(key), hashlib.sha256(row).digest()))
        digests[f"{name}_in_order"] = in_order.hexdigest()
        digests[f"{name}_by_key"] = hashlib.sha256(b"".join(d for _, d in sorted(by_key))).hexdigest()
    return digests


def compare(root: Path, calls: int, against: Path, pairs: int) -> list[dict[str, Any]]:
    """The same answers ingested by `against`'s code and this checkout's, alternately; each with
    its CPU per call (ms), printed as it goes. The caches they fill, the records' clock pinned, must
    hold the same bytes (`cache_digests`), and the two say the same (its summary line)."""
    runs = []
    for _ in range(pairs):
        for name, code in (("against", against), ("this", ROOT)):
            run = {"code": name, **ingested(root, calls, code, fixed_clock=True), "load": os.getloadavg()[0]}
            run["cpu_ms_a_call"] = 1000 * run["ingest_cpu_s"] / calls
            run.update(cache_digests(root / ".judgeloop" / "cache"))
            click.echo(json.dumps(run), err=True)
            runs.append(run)
    held = {
        json.dumps({k: v for k, v in r.items() if k.endswith(("_in_order", "_by_key", "said"))}) for r in runs
    }
    if len(held) != 1:
        raise click.ClickException(f"the ingests differ: {json.dumps(runs)}")
    return runs


@click.command()
@click.option("--calls", "sizes", type=int, multiple=True, help="An export of this many calls (repeatable).")
@click.option(
    "--prompt-chars", type=int, default=20_000, show_default=True, help="The transcript in each prompt."
)
@click.option(
    "--ray", "with_ray", is_flag=True, help="Also answer it with the Ray runner (slow: Ray's start)."
)
@click.option("--concurrency", type=int, default=4, show_default=True, help="Ray: requests at once.")
@click.option("--ray-cpus", type=int, default=2, show_default=True, help="Ray: the local Ray's CPUs.")
@click.option("--object-store-mb", type=int, default=1024, show_default=True, help="Ray: its object store.")
@click.option(
    "--ingest-ray",
    is_flag=True,
    help="Ingest the Ray runner's results (export, run, ingest), not the fake answers.",
)
@click.option("--no-ingest", is_flag=True, help="Skip the fake answers and the ingest (with --ray).")
@click.option(
    "--against",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="Then ingest the same answers with this checkout's code and this one's, alternately (--pairs).",
)
@click.option("--pairs", type=int, default=2, show_default=True, help="With --against: how many pairs.")
@click.option(
    "--dir", "parent", type=click.Path(file_okay=False, path_type=Path), help="Where the temp folders go."
)
@click.option(
    "--reuse",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="A kept folder whose export (one size) is used as it is, and kept.",
)
@click.option("--keep", is_flag=True, help="Keep the folders (their paths are printed).")
@click.option(
    "--real-export",
    is_flag=True,
    help="`judgeloop batch export` itself over the paper's design (one assessment an interview), not "
    "the bench's writer; with --against, alternately with that checkout's code (byte-identical files).",
)
def main(
    sizes: tuple[int, ...],
    prompt_chars: int,
    with_ray: bool,
    concurrency: int,
    ray_cpus: int,
    object_store_mb: int,
    ingest_ray: bool,
    no_ingest: bool,
    against: Path | None,
    pairs: int,
    parent: Path | None,
    reuse: Path | None,
    keep: bool,
    real_export: bool,
) -> None:
    for calls in sizes or (10_000,):
        root = reuse or Path(tempfile.mkdtemp(prefix="judgeloop-batch-", dir=parent))
        try:
            row: dict[str, Any] = {"calls": calls, "prompt_chars": prompt_chars, "root": str(root)}
            row["load_before"] = os.getloadavg()
            if real_export:
                if reuse is None:
                    real_project(root, calls, prompt_chars)
                if against is not None:
                    row["export_pairs"] = export_pairs(root, calls, against.resolve(), pairs)
                    click.echo(json.dumps(row))
                    continue
                row.update(real_exported(root, calls))
            elif reuse is None:
                row.update(exported(root, calls, prompt_chars))
            click.echo(json.dumps(row), err=True)
            if not no_ingest and not ingest_ray:
                row.update(ingest_run(root, calls))
            if with_ray:
                row.update(ray_run(root, concurrency, ray_cpus, object_store_mb))
                click.echo(json.dumps(row), err=True)
            if ingest_ray:
                row.update(ingested(root, calls, results="ray-results.jsonl"))
            if against is not None and not no_ingest:
                row["pairs"] = compare(root, calls, against.resolve(), pairs)
            row["load_after"] = os.getloadavg()
            click.echo(json.dumps(row))
        finally:
            if not (keep or reuse):
                shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
