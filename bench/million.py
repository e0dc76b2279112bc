"""The paper's design at 10k, 100k and 1M calls on the fake backend: what each part costs as a run grows.

    nice -n 10 .venv/bin/python bench/million.py --calls 10000 --calls 100000
    nice -n 10 .venv/bin/python bench/million.py --calls 1000000 --keep /tmp/million   # once, ~GBs of disk

A synthetic experiment of realistic shape: N interviews of about 20 kB each (every one of an item's
calls carries its transcript: the assessment, four judge metrics, each refinement round and its
re-judging), the paper's text protocol, replies of a few hundred tokens, and the experiment responder
(pipeline.testing.judge_responder: first assessments score low on some metrics, so refinement runs;
every seventh judge reply forgets its score, so re-asks run). The number of interviews is chosen for
the number of calls asked (about 11 calls an interview).

Each step runs in a process of its own, so its peak memory (ru_maxrss, from wait4) is its own:

    record   the three LLM stages in process (no DVC), live on the fake backend: calls/s
    replay   the same stages with an empty local cache, cache.mode replay: every call read from the
             recordings (and seeded into the local cache), each recording written again: calls/s;
             the recordings must come back byte-identical
    status   `judgeloop status --all --offline`: every stage dry-run against cache and recordings
    audit    `judgeloop audit` of one call (item, iteration, metric), of the same call by its key
             (--key: the one shard of calls that holds it) and of one item (all its calls)
    verify   `judgeloop cache verify`: every key re-derived, local cache and recordings
    gc       `judgeloop cache gc`: nothing to collect, every recording read for the keys it keeps
    report   the paper's aggregate stage: metrics, report.md and the HTML report with a page per item

and the bytes on disk per call: the recordings (git's or DVC's share), the local cache, and the
interviews themselves (the unique text every prompt repeats). The table gives each size and the
growth factor per 10x calls (1.0: constant per call... 10.0: linear in the run for a time).
Results measured on the 2-core shared machine are in bench/README.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.testing.synthetic import FIRST_ITEM, audit_one_judgement, items_for, make_project, run_stages

ROOT = Path(__file__).resolve().parents[1]


def measured(
    args: list[str], cwd: Path, code: Path = ROOT, limit_mb: int | None = None
) -> tuple[float, int, str, float]:
    """Run a command (judgeloop's code from `code`); its wall time (s), peak memory (bytes), stdout's
    last line and CPU time (s, user and system: on a shared, loaded machine the figure to compare).
    With `limit_mb`, the command is killed once its resident memory passes that (a step at 1M
    calls that would take the shared machine's memory); the exception says how far it got."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(args, cwd=cwd, env=env, stdout=out, stderr=err)
        killed = _watch(process, limit_mb) if limit_mb else threading.Event()
        _, status, usage = os.wait4(process.pid, 0)
        elapsed = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    cpu = usage.ru_utime + usage.ru_stime
    if killed.is_set():
        raise click.ClickException(
            f"{' '.join(args)} killed past {limit_mb} MB resident: {elapsed:.1f} s wall, {cpu:.1f} s CPU, "
            f"peak {usage.ru_maxrss / 1024:,.0f} MB"
        )
    if os.waitstatus_to_exitcode(status) != 0:
        raise click.ClickException(f"{' '.join(args)} failed:\n{stdout[-2000:]}\n{stderr[-2000:]}")
    lines = stdout.strip().splitlines()
    return elapsed, usage.ru_maxrss * 1024, lines[-1] if lines else "", cpu


def _watch(process: subprocess.Popen[bytes], limit_mb: int) -> threading.Event:
    """A thread that kills `process` once its resident memory (VmRSS) passes `limit_mb`; the event
    is set when it did."""
    killed = threading.Event()
    # A pidfd names this very process: once it is reaped, a reused pid is never signalled.
    pidfd = os.pidfd_open(process.pid)

    def watch() -> None:
        # Not process.poll(): it would reap the child before the caller's wait4 reads its usage.
        try:
            while _resident_kb(process.pid) <= limit_mb * 1024:
                time.sleep(0.5)
            killed.set()
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        except _Ended:
            pass
        finally:
            os.close(pidfd)

    threading.Thread(target=watch, daemon=True).start()
    return killed


def _resident_kb(pid: int) -> int:
    """The process's VmRSS (kB); _Ended once it has ended (a zombie has none)."""
    try:
        fields = Path(f"/proc/{pid}/status").read_text().split("VmRSS:")
    except OSError:
        fields = []
    if len(fields) < 2:
        raise _Ended
    return int(fields[1].split()[0])


class _Ended(Exception):
    pass


def progress(name: str, wall: float, peak: int, cpu: float) -> None:
    """One step's figures on stderr as soon as it ends: a long run stopped or killed midway still
    says how far it got and what each finished step cost."""
    figures = f"{wall:.1f} s wall, {cpu:.1f} s CPU, {peak / 2**20:,.0f} MB peak"
    click.echo(f"{time.strftime('%H:%M:%S')} {name}: {figures}", err=True)


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def snapshot(folder: Path) -> dict[str, str]:
    """Each recording file's sha256, read in chunks: the bench compares the replayed recordings
    byte for byte without holding them (at 100k calls they are hundreds of MB, twice)."""
    digests = {}
    for path in sorted(folder.rglob("*.jsonl")):
        digest = hashlib.sha256()
        with path.open("rb") as stream:
            for chunk in iter(lambda: stream.read(1 << 20), b""):
                digest.update(chunk)
        digests[path.relative_to(folder).as_posix()] = digest.hexdigest()
    return digests


def bench_size(root: Path, calls_wanted: int, chars: int) -> dict[str, Any]:
    items = items_for(calls_wanted)
    make_project(root, items, chars, ROOT / "params.yaml")
    me = [sys.executable, str(Path(__file__).resolve())]
    cli = [sys.executable, "-m", "pipeline.tools.cli"]
    row: dict[str, Any] = {"items": items}
    wall, peak, last, cpu = measured([*me, "stages", str(root), "auto"], root)
    calls = int(last)
    progress("record", wall, peak, cpu)
    row.update(calls=calls, record_s=wall, record_rss=peak, record_cpu=cpu)
    recorded = snapshot(root / "recordings")
    row["recordings_bytes"] = folder_bytes(root / "recordings")
    row["data_bytes"] = folder_bytes(root / "data")
    shutil.rmtree(root / ".judgeloop")
    wall, peak, last, cpu = measured([*me, "stages", str(root), "replay"], root)
    progress("replay", wall, peak, cpu)
    if int(last) != calls or snapshot(root / "recordings") != recorded:
        raise click.ClickException("the replay did not give the recorded calls back byte-identically")
    del recorded
    row.update(replay_s=wall, replay_rss=peak, replay_cpu=cpu)
    row["cache_bytes"] = folder_bytes(root / ".judgeloop" / "cache")
    steps = {
        "status": [*cli, "status", "--all", "--offline"],
        **audit_steps(root, items),
        "verify": [*cli, "cache", "verify"],
        "gc": [*cli, "cache", "gc"],
        "report": [sys.executable, "-m", "stages", "paper", "aggregate"],
    }
    for name, args in steps.items():
        wall, peak, _, cpu = measured(args, root)
        progress(name, wall, peak, cpu)
        row.update({f"{name}_s": wall, f"{name}_rss": peak, f"{name}_cpu": cpu})
    return row


def audit_steps(root: Path, items: int, *, by_key: bool = True) -> dict[str, list[str]]:
    """The audit steps: one judgement by its item, iteration and metric, the same by its key, and
    every call of its item."""
    cli = [sys.executable, "-m", "pipeline.tools.cli"]
    item, audit_call = audit_one_judgement(items)
    steps = {"audit_call": [*cli, *audit_call]}
    if by_key:
        steps["audit_key"] = [*cli, "audit", "--key", judgement_key(root, audit_call)]
    steps["audit_item"] = [*cli, "audit", "--item", item]
    return steps


def judgement_key(root: Path, audit_call: list[str]) -> str:
    """The key of the call `audit_call` shows, found here (not timed)."""
    out = subprocess.run(
        [sys.executable, "-m", "pipeline.tools.cli", *audit_call, "--format", "jsonl"],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        check=True,
        text=True,
    ).stdout
    [line] = out.splitlines()
    key: str = json.loads(line)["key"]
    return key


Shown = Callable[[dict[str, Any]], str]
COLUMNS: tuple[tuple[str, str, Shown], ...] = (
    ("calls", "calls", lambda r: f"{r['calls']:,}"),
    ("record", "calls/s", lambda r: f"{r['calls'] / r['record_s']:,.0f}"),
    ("replay", "calls/s", lambda r: f"{r['calls'] / r['replay_s']:,.0f}"),
    ("status", "s", lambda r: f"{r['status_s']:.1f}"),
    ("audit call", "s", lambda r: f"{r['audit_call_s']:.2f}"),
    ("audit key", "s", lambda r: f"{r['audit_key_s']:.2f}"),
    ("audit item", "s", lambda r: f"{r['audit_item_s']:.2f}"),
    ("verify", "s", lambda r: f"{r['verify_s']:.1f}"),
    ("gc", "s", lambda r: f"{r['gc_s']:.1f}"),
    ("report", "s", lambda r: f"{r['report_s']:.1f}"),
)
MEMORY = ("record", "replay", "status", "audit_call", "audit_key", "audit_item", "verify", "gc", "report")
BYTES = (("recordings", "recordings_bytes"), ("local cache", "cache_bytes"), ("interviews", "data_bytes"))


def table(rows: list[dict[str, Any]]) -> str:
    out = ["time          " + "".join(f"{name:>12}" for name, _, _ in COLUMNS)]
    out += ["              " + "".join(f"{unit:>12}" for _, unit, _ in COLUMNS)]
    out += ["              " + "".join(f"{show(r):>12}" for _, _, show in COLUMNS) for r in rows]
    out += ["CPU time (s)    " + "".join(f"{name:>12}" for name in MEMORY)]
    out += [f"{r['calls']:>16,}" + "".join(f"{r[f'{name}_cpu']:>12,.1f}" for name in MEMORY) for r in rows]
    out += ["peak memory (MB)" + "".join(f"{name:>12}" for name in MEMORY)]
    out += [
        f"{r['calls']:>16,}" + "".join(f"{r[f'{name}_rss'] / 2**20:>12,.0f}" for name in MEMORY) for r in rows
    ]
    out += ["bytes a call    " + "".join(f"{name:>14}" for name, _ in BYTES)]
    out += [
        f"{r['calls']:>16,}" + "".join(f"{r[key] / r['calls']:>14,.0f}" for _, key in BYTES) for r in rows
    ]
    for before, after in itertools.pairwise(rows):
        scale = after["calls"] / before["calls"]
        growth = {
            # ratio ** (1 / log10(scale)): the factor per 10x calls of a power law through both sizes
            key.removesuffix("_s"): (after[key] / before[key]) ** (1 / math.log10(scale))
            for key in after
            if key.endswith(("_s", "_rss", "_cpu"))
        }
        out.append(
            f"growth per 10x calls, {before['calls']:,} -> {after['calls']:,} (10 = linear): "
            + ", ".join(f"{key} {value:.1f}" for key, value in growth.items())
        )
    return "\n".join(out)


@click.group(invoke_without_command=True)
@click.option(
    "--calls", "sizes", type=int, multiple=True, help="A run of about this many calls (repeatable)."
)
@click.option("--chars", type=int, default=20_000, show_default=True, help="Characters an interview.")
@click.option(
    "--keep", type=click.Path(file_okay=False, path_type=Path), help="Build the runs here and keep them."
)
@click.option("--json-out", type=click.Path(dir_okay=False, path_type=Path), help="Also write the rows here.")
@click.pass_context
def main(
    ctx: click.Context, sizes: tuple[int, ...], chars: int, keep: Path | None, json_out: Path | None
) -> None:
    if ctx.invoked_subcommand is not None:
        return
    rows = sized_runs(sizes or (10_000, 100_000), chars, keep, json_out, bench_size, "judgeloop-million-")
    click.echo(table(rows))


def sized_runs(
    sizes: tuple[int, ...],
    chars: int,
    keep: Path | None,
    json_out: Path | None,
    one_size: Callable[[Path, int, int], dict[str, Any]],
    prefix: str,
) -> list[dict[str, Any]]:
    """`one_size` run at each size in a project folder of its own (kept under `keep`, else deleted),
    each row with the load before and after it, printed and written to `json_out` as it ends (so a
    later size that fails loses nothing)."""
    rows = []
    for size in sizes:
        base = keep or Path(tempfile.mkdtemp(prefix=prefix))
        root = base / f"calls-{size}"
        root.mkdir(parents=True)
        load = os.getloadavg()
        try:
            row = one_size(root, size, chars)
        finally:
            if keep is None:
                shutil.rmtree(base, ignore_errors=True)
        row["load"] = (load, os.getloadavg())
        rows.append(row)
        click.echo(json.dumps(row), err=True)
        if json_out is not None:
            json_out.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return rows


CODE_OPTION = click.option(
    "--code",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=ROOT,
    help="judgeloop's code to run (a checkout of another commit, for a before/after).",
)


@main.command("stages", hidden=True)
@click.argument("root", type=click.Path(file_okay=False, path_type=Path))
@click.argument("mode")
def stages_command(root: Path, mode: str) -> None:
    """The three LLM stages in this process (a step of the bench, for its own peak memory)."""
    click.echo(run_stages(root, mode))


@main.command("audits")
@click.argument("root", type=click.Path(file_okay=False, exists=True, path_type=Path))
@CODE_OPTION
@click.option("--no-key", is_flag=True, help="No audit --key step (code from before it existed).")
@click.option("--repeat", type=int, default=3, show_default=True)
def audits_command(root: Path, code: Path, no_key: bool, repeat: int) -> None:
    """Only the audit steps, on a run kept with --keep (ROOT: its calls-N folder): CPU s and peak MB."""
    items = sum(1 for _ in (root / "data").glob("*_P"))  # an interview's folder each (make_project)
    for name, args in audit_steps(root, items, by_key=not no_key).items():
        for _ in range(repeat):
            wall, peak, _, cpu = measured(args, root, code.resolve())
            click.echo(f"{name:<12} wall {wall:6.2f} s  CPU {cpu:6.2f} s  peak {peak / 2**20:6.0f} MB")


# --- plain `judgeloop status` in a DVC project (issue 33): what the common cases cost ---------------
# `status --all` above dry-runs every stage; plain `status` dry-runs only the stages `dvc status`
# finds out of date. Measured in the synthetic project made a real DVC project (the paper's four
# stages of dvc.yaml, `dvc repro` in replay mode from the recordings, dvc.lock written by DVC), in
# three cases: nothing changed; one interview's transcript changed (one item); a judge param
# changed (every judge call). `dvc status` alone is timed beside each, for DVC's share.


def paper_dvc_project(root: Path) -> None:
    """git + DVC in `root` (configured as this repository's .dvc/config), the code its stages depend
    on, and dvc.yaml's paper stages (assess, judge, refine, aggregate) only."""
    for name in ("pipeline", "stages"):
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".dvcignore", root / ".dvcignore")
    import yaml

    generated = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))
    paper = {k: v for k, v in generated["stages"].items() if v["cmd"].startswith("python -m stages paper ")}
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": paper}, sort_keys=False), encoding="utf-8")
    for args in (["git", "init", "-q"], [sys.executable, "-m", "dvc", "init", "-q"]):
        subprocess.run(args, cwd=root, check=True, stdout=subprocess.DEVNULL)
    shutil.copy(ROOT / ".dvc" / "config", root / ".dvc" / "config")


def _changed(path: Path, old: str, new: str) -> str:
    text = path.read_text(encoding="utf-8")
    if old not in text:
        raise click.ClickException(f"{path}: no {old!r} to change")
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return text


def plain_status_size(root: Path, calls_wanted: int, chars: int) -> dict[str, Any]:
    items = items_for(calls_wanted)
    make_project(root, items, chars, ROOT / "params.yaml")
    me = [sys.executable, str(Path(__file__).resolve())]
    dvc = [sys.executable, "-m", "dvc"]
    row: dict[str, Any] = {"items": items}
    wall, peak, last, cpu = measured([*me, "stages", str(root), "auto"], root)
    row.update(calls=int(last), record_s=wall, record_rss=peak, record_cpu=cpu)
    paper_dvc_project(root)
    wall, peak, _, cpu = measured(["env", "JUDGELOOP_CACHE_MODE=replay", *dvc, "repro", "-q"], root)
    row.update(dvc_repro_s=wall, dvc_repro_rss=peak, dvc_repro_cpu=cpu)
    return row | plain_cases(root, items)


def plain_cases(
    root: Path,
    items: int,
    code: Path = ROOT,
    only: tuple[str, ...] = (),
    limit_mb: int | None = None,
) -> dict[str, Any]:
    """The three cases of plain status in a project plain_status_size made (judgeloop's code from
    `code`), or those `only` names: `dvc status` and `judgeloop status --offline`, each with its
    change made and undone (each step killed past `limit_mb` of resident memory, if given)."""
    dvc = [sys.executable, "-m", "dvc"]
    # -P: the project holds a copy of pipeline/ (its stages' code deps); `python -m` would put the
    # project first on sys.path and run that copy, whatever `code` says.
    status = [sys.executable, "-P", "-m", "pipeline.tools.cli", "status", "--offline"]
    row: dict[str, Any] = {}
    transcript = root / "data" / f"{FIRST_ITEM + items // 2}_P" / f"{FIRST_ITEM + items // 2}_TRANSCRIPT.csv"
    cases: dict[str, tuple[Path, str, str]] = {
        "unchanged": (root / "params.yaml", "", ""),
        "one_item": (transcript, "about sleep, work", "about sleep, work, changed,"),
        "judge_param": (root / "params.yaml", "num_predict: 96", "num_predict: 97"),
    }
    for case, (path, old, new) in cases.items():
        if only and case not in only:
            continue
        before = _changed(path, old, new) if old else None
        try:
            for step, args in (("dvc", [*dvc, "status"]), ("status", status)):
                wall, peak, last, cpu = measured(args, root, code, limit_mb)
                row.update({f"{case}_{step}_s": wall, f"{case}_{step}_rss": peak, f"{case}_{step}_cpu": cpu})
                row[f"{case}_{step}_said"] = last
        finally:
            if before is not None:
                path.write_text(before, encoding="utf-8")
    return row


PLAIN_CASES = ("unchanged", "one_item", "judge_param")


def plain_table(rows: list[dict[str, Any]]) -> str:
    out = ["case                 calls   dvc status: CPU s  wall s  MB   judgeloop status: CPU s  wall s  MB"]
    for r in rows:
        for case in PLAIN_CASES:
            cells = [
                f"{r[f'{key}_cpu']:>8.1f}{r[f'{key}_s']:>8.1f}{r[f'{key}_rss'] / 2**20:>6.0f}"
                for key in (f"{case}_dvc", f"{case}_status")
            ]
            out.append(f"{case:<14}{r['calls']:>12,}{'':>11}{cells[0]}{'':>17}{cells[1]}")
    for before, after in itertools.pairwise(rows):
        power = 1 / math.log10(after["calls"] / before["calls"])
        growth = {
            f"{case} {step} {what}": (after[key := f"{case}_{step}_{what}"] / before[key]) ** power
            for case in PLAIN_CASES
            for step in ("dvc", "status")
            for what in ("cpu", "rss")
        }
        out.append(
            f"growth per 10x calls, {before['calls']:,} -> {after['calls']:,} (10 = linear): "
            + ", ".join(f"{key} {value:.1f}" for key, value in growth.items())
        )
    return "\n".join(out)


@main.command("plain-cases")
@click.argument("root", type=click.Path(file_okay=False, exists=True, path_type=Path))
@CODE_OPTION
@click.option("--calls", type=int, required=True, help="The run's calls (as recorded), for the table.")
@click.option(
    "--case", "only", type=click.Choice(PLAIN_CASES), multiple=True, help="Only this case (repeatable)."
)
@click.option("--repeat", type=int, default=1, show_default=True)
@click.option("--limit-mb", type=int, help="Kill a step past this resident memory (MB).")
def plain_cases_command(
    root: Path, code: Path, calls: int, only: tuple[str, ...], repeat: int, limit_mb: int | None
) -> None:
    """Only the plain-status cases, on a project kept by `plain-status --keep` (ROOT: its calls-N
    folder): for a before/after on the same project, or a measurement at 1M calls."""
    items = sum(1 for _ in (root / "data").glob("*_P"))
    for _ in range(repeat):
        row = plain_cases(root, items, code.resolve(), only, limit_mb)
        row["calls"] = calls
        click.echo(json.dumps(row), err=True)
        for case in only or PLAIN_CASES:
            for step in ("dvc", "status"):
                key = f"{case}_{step}"
                click.echo(
                    f"{key:<20} CPU {row[f'{key}_cpu']:7.2f} s  wall {row[f'{key}_s']:7.2f} s  "
                    f"peak {row[f'{key}_rss'] / 2**20:6.0f} MB  said: {row[f'{key}_said']}",
                    err=True,
                )
        if not only:
            click.echo(plain_table([row]))


@main.command("checks")
@click.argument("root", type=click.Path(file_okay=False, exists=True, path_type=Path))
@CODE_OPTION
@click.option("--step", "only", type=click.Choice(("verify", "gc", "report")), multiple=True)
@click.option("--repeat", type=int, default=1, show_default=True)
@click.option("--limit-mb", type=int, help="Kill a step past this resident memory (MB).")
def checks_command(root: Path, code: Path, only: tuple[str, ...], repeat: int, limit_mb: int | None) -> None:
    """`cache verify`, `cache gc` and the report (the paper's aggregate stage) on a kept run (ROOT:
    its calls-N folder): CPU s, wall s and peak MB each."""
    # -P: a DVC project made by paper_dvc_project holds a copy of pipeline/ and stages/.
    steps = {
        "verify": [sys.executable, "-P", "-m", "pipeline.tools.cli", "cache", "verify"],
        "gc": [sys.executable, "-P", "-m", "pipeline.tools.cli", "cache", "gc"],
        "report": [sys.executable, "-P", "-m", "stages", "paper", "aggregate"],
    }
    for name, args in steps.items():
        for _ in range(repeat if not only or name in only else 0):
            wall, peak, last, cpu = measured(args, root, code.resolve(), limit_mb)
            click.echo(
                f"{name:<8} CPU {cpu:7.2f} s  wall {wall:7.2f} s  peak {peak / 2**20:6.0f} MB  said: {last}"
            )


# --- what a reproduction check costs (issue 33: "replay 20,000 calls/s") ---------------------------
# A replay re-runs the design's own code for every call. A reproduction check need not: DVC skips a
# stage whose deps, params and outs are as dvc.lock says, and `judgeloop check` replays every stage
# in one process. Each measured on a kept run made a DVC project: calls/s of wall and of CPU.


def reproduction_steps(
    root: Path, calls: int, code: Path = ROOT, lock_by_replay: bool = True
) -> dict[str, Any]:
    """On a kept run (ROOT: its calls-N folder, recorded and replayed by this bench), made a DVC
    project of the paper's stages if it is not one: `dvc repro` in replay mode from the recordings
    (which locks it; else `dvc commit -f`, not timed), then `dvc repro` with nothing changed (every
    stage skipped), `judgeloop check paper`, and plain status with nothing changed."""
    dvc = [sys.executable, "-m", "dvc"]
    if not (root / "dvc.yaml").exists():
        paper_dvc_project(root)
    row: dict[str, Any] = {"calls": calls}
    steps: dict[str, list[str]] = {}
    if lock_by_replay:
        steps["dvc_replay"] = ["env", "JUDGELOOP_CACHE_MODE=replay", *dvc, "repro", "-q"]
    else:
        env = {**os.environ, "PYTHONPATH": str(code)}
        subprocess.run([*dvc, "commit", "-f", "-q"], cwd=root, check=True, env=env)
    steps["dvc_skip"] = [*dvc, "repro", "-q"]
    # -P: the project holds a copy of pipeline/ (its stages' code deps); run `code`'s.
    steps["check"] = [sys.executable, "-P", "-m", "pipeline.tools.cli", "check", "paper"]
    for name, args in steps.items():
        wall, peak, last, cpu = measured(args, root, code)
        progress(name, wall, peak, cpu)
        row.update({f"{name}_s": wall, f"{name}_rss": peak, f"{name}_cpu": cpu, f"{name}_said": last})
    # A step that fails (check's exit 1 at a difference) has raised in measured.
    return row | plain_cases(root, sum(1 for _ in (root / "data").glob("*_P")), code, ("unchanged",))


@main.command("reproduction")
@click.argument("root", type=click.Path(file_okay=False, exists=True, path_type=Path))
@CODE_OPTION
@click.option("--calls", type=int, required=True, help="The run's calls (as recorded), for the rates.")
@click.option("--lock-by-commit", is_flag=True, help="Lock by `dvc commit -f` (untimed), not a replay.")
@click.option("--json-out", type=click.Path(dir_okay=False, path_type=Path), help="Also write the row here.")
def reproduction_command(
    root: Path, code: Path, calls: int, lock_by_commit: bool, json_out: Path | None
) -> None:
    """What a reproduction check costs on a kept run (ROOT: its calls-N folder): `dvc repro` from the
    recordings, `dvc repro` with nothing changed, `judgeloop check paper`, plain status; calls/s each."""
    load = os.getloadavg()
    row = reproduction_steps(root, calls, code.resolve(), not lock_by_commit)
    row["load"] = (load, os.getloadavg())
    click.echo(json.dumps(row), err=True)
    if json_out is not None:
        json_out.write_text(json.dumps(row, indent=1), encoding="utf-8")
    for name in ("dvc_replay", "dvc_skip", "check", "unchanged_dvc", "unchanged_status"):
        if f"{name}_s" in row:
            wall, cpu = row[f"{name}_s"], row[f"{name}_cpu"]
            click.echo(
                f"{name:<17} {calls / wall:>10,.0f} calls/s  ({calls / cpu:>10,.0f} per CPU s)  "
                f"wall {wall:7.1f} s  CPU {cpu:7.1f} s  peak {row[f'{name}_rss'] / 2**20:6.0f} MB"
            )


@main.command("plain-status")
@click.option(
    "--calls", "sizes", type=int, multiple=True, help="A run of about this many calls (repeatable)."
)
@click.option("--chars", type=int, default=20_000, show_default=True, help="Characters an interview.")
@click.option(
    "--keep", type=click.Path(file_okay=False, path_type=Path), help="Build the runs here and keep them."
)
@click.option("--json-out", type=click.Path(dir_okay=False, path_type=Path), help="Also write the rows here.")
def plain_status_command(
    sizes: tuple[int, ...], chars: int, keep: Path | None, json_out: Path | None
) -> None:
    """Plain `judgeloop status --offline` (the stages DVC finds out of date) in a DVC project of the
    synthetic experiment: nothing changed, one transcript changed, a judge param changed."""
    rows = sized_runs(sizes or (10_000,), chars, keep, json_out, plain_status_size, "judgeloop-plain-status-")
    click.echo(plain_table(rows))


if __name__ == "__main__":
    main()
