"""The paper's aggregate stage as DVC runs it: its imports, its functions, and DVC's share (issue 31).

    JUDGELOOP_SHARED=/work/shared .venv/bin/python bench/scale.py --fixed --median 0.1 --no-replay --keep P
    .venv/bin/python bench/aggregate_profile.py P                # this checkout's code
    .venv/bin/python bench/aggregate_profile.py P --base OTHER   # and another checkout's, alternated

Each checkout's code (pipeline/, stages/, dvc.yaml) goes into a copy of the kept project (its git
and DVC folders, recordings, results, the verified memo), and there, in cache mode replay:

1. `python -X importtime -m stages paper aggregate`: the stage's own imports, the slowest by
   cumulative time (the least over the runs), and how many of the project's modules it loads (each
   one a code dep DVC hashes and writes into dvc.lock for the stage);
2. the stage under cProfile, timed by process_time: the functions with the most time of their own;
3. the stage process alone, then `dvc repro -s --force aggregate`, alternated: wall and CPU (user +
   system) of each; the difference is DVC's share of the stage in a run (its start, the stage's
   deps checked, its outs hashed, dvc.lock rewritten, its exit). Two parts of that share beside
   it: `dvc stage list` (DVC's start and its load of every stage of dvc.yaml and dvc.lock, which
   a whole `dvc repro` pays once, not per stage), and dvc.lock's round trip as DVC rewrites it
   after each stage (read for update and written back, in one process: the lock's size).

bench/report_phases.py splits the stage's own time by phase; this one places the stage in DVC.
The machine is shared: compare CPU, alternate the checkouts, say the load.
"""

from __future__ import annotations

import os
import pstats
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
STAGE = [sys.executable, "-m", "stages", "paper", "aggregate"]
PROFILED = r"""
import cProfile, sys, time
sys.argv = ["stages", "paper", "aggregate"]
sys.path.insert(0, ".")
profiler = cProfile.Profile(time.process_time)
profiler.enable()
try:
    from stages.runner import main
    main()
except SystemExit:
    pass
profiler.disable()
profiler.dump_stats(OUT)
"""
LOCK_ROUND_TRIP = r"""
import io, time
from dvc.utils.serialize._yaml import _dump, parse_yaml_for_update
text = open("dvc.lock", encoding="utf-8").read()
start = time.process_time()
for _ in range(5):
    _dump(parse_yaml_for_update(text, "dvc.lock"), io.StringIO())
print((time.process_time() - start) / 5)
"""
IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def copy(project: Path, code: Path, into: Path) -> Path:
    """The kept project with `code`'s pipeline/, stages/ and dvc.yaml, byte-compiled as a run is."""
    shutil.copytree(project, into, symlinks=True, ignore=shutil.ignore_patterns("pipeline", "stages"))
    for name in ("pipeline", "stages"):
        shutil.copytree(code / name, into / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(code / "dvc.yaml", into / "dvc.yaml")
    subprocess.run([sys.executable, "-m", "compileall", "-q", "pipeline", "stages"], cwd=into, check=True)
    return into


def environment() -> dict[str, str]:
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    return {**os.environ, "PATH": path, "JUDGELOOP_CACHE_MODE": "replay", "DVC_NO_ANALYTICS": "1"}


def timed(args: list[str], folder: Path) -> tuple[float, float]:
    """(wall, CPU user + system) of a command and its children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(args, cwd=folder, env=environment(), check=True, capture_output=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def imports(folder: Path) -> dict[str, int]:
    """Module -> cumulative microseconds of its import, and the project's modules loaded ("ours")."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *STAGE[1:]],
        cwd=folder,
        env=environment(),
        check=True,
        capture_output=True,
        text=True,
    )
    found: dict[str, int] = {}
    for line in done.stderr.splitlines():
        match = IMPORT_LINE.match(line)
        if match:
            found[match[4]] = int(match[2])
    found["ours"] = sum(1 for name in found if name.startswith(("pipeline", "stages")))
    return found


def profile(folder: Path, top: int) -> str:
    out = folder / ".judgeloop" / "aggregate.prof"
    code = PROFILED.replace("OUT", repr(str(out)))
    subprocess.run(
        [sys.executable, "-c", code], cwd=folder, env=environment(), check=True, capture_output=True
    )
    stats = pstats.Stats(str(out))
    stats.sort_stats("tottime")
    rows = []
    for (filename, line, name), (_, calls, own, cumulative, _) in list(stats.stats.items()):  # type: ignore[attr-defined]
        rows.append((own, cumulative, calls, f"{Path(filename).name}:{line}({name})"))
    rows.sort(reverse=True)
    return "\n".join(f"  {own:7.3f} {cum:7.3f} {calls:8d}  {where}" for own, cum, calls, where in rows[:top])


@click.command()
@click.argument("project", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--base", type=click.Path(exists=True, file_okay=False, path_type=Path), help="Another checkout."
)
@click.option("--runs", default=3, show_default=True, help="Runs of each checkout.")
@click.option("--top", default=20, show_default=True, help="Rows of imports and of functions shown.")
def main(project: Path, base: Path | None, runs: int, top: int) -> None:
    sides = {"this": ROOT, **({"base": base} if base else {})}
    names = sorted(sides, reverse=True)  # base first, then this
    with tempfile.TemporaryDirectory() as tmp:
        folders = {name: copy(project, code, Path(tmp) / name) for name, code in sides.items()}
        table: dict[str, dict[str, list[float]]] = {name: {} for name in names}
        imported: dict[str, dict[str, int]] = {name: {} for name in names}
        for n in range(runs):
            for name in names:
                row, folder = table[name], folders[name]
                stage_wall, stage_cpu = timed(STAGE, folder)
                dvc_wall, dvc_cpu = timed(
                    [sys.executable, "-m", "dvc", "repro", "-s", "--force", "aggregate"], folder
                )
                _, list_cpu = timed([sys.executable, "-m", "dvc", "stage", "list"], folder)
                lock = subprocess.run(
                    [sys.executable, "-c", LOCK_ROUND_TRIP], cwd=folder, check=True, capture_output=True
                )
                for label, value in (
                    ("stage process, wall", stage_wall),
                    ("stage process, CPU", stage_cpu),
                    ("dvc repro -s aggregate, wall", dvc_wall),
                    ("dvc repro -s aggregate, CPU", dvc_cpu),
                    ("DVC's share, wall", dvc_wall - stage_wall),
                    ("DVC's share, CPU", dvc_cpu - stage_cpu),
                    ("  dvc stage list (start, load), CPU", list_cpu),
                    ("  dvc.lock round trip, CPU", float(lock.stdout)),
                ):
                    row.setdefault(label, []).append(value)
                for module, micros in imports(folder).items():
                    imported[name][module] = min(micros, imported[name].get(module, micros))
            load = Path("/proc/loadavg").read_text().split()[0]
            click.echo(f"run {n + 1} of {runs} done, load {load}")
        click.echo(
            f"{'seconds (min-max of ' + str(runs) + ' runs)':38s}" + "".join(f"{n:>16s}" for n in names)
        )
        for label in table[names[0]]:
            cells = "".join(f"{min(table[n][label]):>9.3f}-{max(table[n][label]):.3f}" for n in names)
            click.echo(f"{label:38s}{cells}")
        for name in names:
            found = imported[name]
            ours = found.pop("ours")
            click.echo(
                f"\n{name}: {ours} of the project's modules loaded; slowest imports (cumulative ms, least):"
            )
            for module, micros in sorted(found.items(), key=lambda kv: -kv[1])[:top]:
                click.echo(f"  {micros / 1000:8.1f}  {module}")
            click.echo(f"{name}: own time, cumulative, calls (cProfile, process_time; inflates pure Python):")
            click.echo(profile(folders[name], top))


if __name__ == "__main__":
    main()
