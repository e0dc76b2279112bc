"""Where the paper's aggregate stage (the report) spends its CPU, phase by phase, on a kept project.

    JUDGELOOP_SHARED=/work/shared .venv/bin/python bench/scale.py --fixed --median 0.1 --no-replay --keep P
    .venv/bin/python bench/report_phases.py P                  # this checkout's code, 3 runs
    .venv/bin/python bench/report_phases.py P --base OTHER     # and another checkout's, alternated

Each run copies the project's recordings, results and params into a scratch folder beside the code
under test (this checkout's pipeline/ and stages/, or OTHER's), and runs the stage as DVC runs it
(`python -m stages paper aggregate`) in a process of its own: first plain, for its CPU (user +
system) and wall time, then again with its phases timed by process_time (imports; the recordings
read and verified; the summary; the index's scan; the item pages and, inside them, each call's
record parsed, the texts placed, the judge replies read again, jinja's rendering, the files
written). A phase's time includes the phases named under it. The pages of the two checkouts are
compared byte for byte (`--base`): a difference is reported and fails the run.

The verified memo (.judgeloop/verified) is the kept project's, so the recordings are not verified
from scratch; what the stage does in `dvc repro` after the LLM stages, which leave the memo full.
The machine is shared: compare CPU, alternate the checkouts, and say the load.
"""

from __future__ import annotations

import filecmp
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]

# Run in the stage's process: each phase's function wrapped in place, its process_time summed.
PHASES = r"""
import functools, sys, time
sys.argv = ["stages", "paper", "aggregate"]
sys.path.insert(0, ".")
started = time.process_time()
from stages.runner import main
import jinja2
import pathlib
import pipeline.experiments.paper.aggregate as aggregate
import pipeline.experiments.paper.report.html as html
import pipeline.experiments.paper.report.items as items
import pipeline.experiments.paper.report.texts as texts
import pipeline.data.recorded_stages as recorded
import pipeline.judges.rubric.judge as judge
imported = time.process_time() - started
spent = {}

def timed(owner, name, label):
    raw = owner.__dict__.get(name) if isinstance(owner, type) else None
    function = getattr(owner, name)

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        start = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0.0) + time.process_time() - start

    setattr(owner, name, staticmethod(wrapper) if isinstance(raw, staticmethod) else wrapper)

timed(aggregate, "_recorded", "recordings read and verified")
timed(aggregate, "_summarize", "summary, metrics and plots")
timed(html._IndexScan, "add", "the index's scan")
timed(html, "write_pages", "item pages, rendered and written")
timed(recorded.StageRecords, "__getitem__", "  each call's record parsed")
timed(texts.PageTexts, "place", "  texts placed")
timed(judge, "read_score", "  judge replies read again")
timed(jinja2.Template, "render", "  jinja's rendering")
timed(pathlib.Path, "write_text", "  files written")
start = time.process_time()
try:
    main()
except SystemExit:
    pass
print(f"imports\t{imported:.3f}")
print(f"the stage after its imports\t{time.process_time() - start:.3f}")
for label, seconds in spent.items():
    print(f"{label}\t{seconds:.3f}")
"""


def scratch(project: Path, code: Path, into: Path) -> Path:
    """The kept project's data with `code`'s pipeline/ and stages/."""
    shutil.copytree(project, into, symlinks=True, ignore=shutil.ignore_patterns("pipeline", "stages", ".git"))
    for name in ("pipeline", "stages"):
        shutil.copytree(code / name, into / name, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "compileall", "-q", "pipeline", "stages"], cwd=into, check=True)
    return into


def plain(folder: Path) -> tuple[float, float]:
    """(wall, CPU user + system) of one stage process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "stages", "paper", "aggregate"], cwd=folder, check=True, capture_output=True
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def phases(folder: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", PHASES], cwd=folder, check=True, capture_output=True, text=True
    )
    return {label: float(s) for label, s in (line.split("\t") for line in done.stdout.splitlines())}


def same_pages(a: Path, b: Path) -> bool:
    outputs = filecmp.dircmp(a / "outputs", b / "outputs")
    pending = [outputs]
    while pending:
        cmp = pending.pop()
        _, mismatch, errors = filecmp.cmpfiles(cmp.left, cmp.right, cmp.common_files, shallow=False)
        if mismatch or errors or cmp.left_only or cmp.right_only:
            click.echo(f"differ in {cmp.left}: {mismatch + errors + cmp.left_only + cmp.right_only}")
            return False
        pending += cmp.subdirs.values()
    return True


@click.command()
@click.argument("project", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--base", type=click.Path(exists=True, file_okay=False, path_type=Path), help="Another checkout."
)
@click.option("--runs", default=3, show_default=True, help="Runs of each checkout.")
def main(project: Path, base: Path | None, runs: int) -> None:
    sides = {"this": ROOT, **({"base": base} if base else {})}
    with tempfile.TemporaryDirectory() as tmp:
        folders = {name: scratch(project, code, Path(tmp) / name) for name, code in sides.items()}
        table: dict[str, dict[str, list[float]]] = {name: {} for name in sides}
        for n in range(runs):
            for name in sorted(sides, reverse=True):  # base first, then this
                wall, cpu = plain(folders[name])
                row = table[name]
                row.setdefault("stage process, CPU", []).append(cpu)
                row.setdefault("stage process, wall", []).append(wall)
                for label, seconds in phases(folders[name]).items():
                    row.setdefault(label, []).append(seconds)
            load = Path("/proc/loadavg").read_text().split()[0]
            click.echo(f"run {n + 1} of {runs} done, load {load}")
        if base is not None and not same_pages(folders["base"], folders["this"]):
            raise SystemExit("the two checkouts' reports differ")
    names = sorted(sides, reverse=True)
    click.echo(f"{'seconds (min-max of ' + str(runs) + ' runs)':46s}" + "".join(f"{n:>16s}" for n in names))
    for label in table["this"]:
        cells = [table[n].get(label, []) for n in names]
        shown = "".join(f"{min(c):>9.3f}-{max(c):.3f}" if c else f"{'':>16s}" for c in cells)
        click.echo(f"{label:46s}{shown}")
    if base is not None:
        click.echo("the reports are byte-identical")


if __name__ == "__main__":
    os.environ.setdefault("JUDGELOOP_CACHE_MODE", "replay")
    main()
