"""What `judgeloop audit` reads to show one call or one item, in process (no CLI start): CPU s and
bytes read, by key (every stage), by item in the judge stage, and by item in every stage.

    nice -n 19 .venv/bin/python bench/million.py --calls 10000 --keep /tmp/million   # a kept run
    PYTHONPATH=CHECKOUT .venv/bin/python bench/audit_reads.py /tmp/million/calls-10000

The item is the one `bench/million.py audits` shows (pipeline.testing.synthetic.audit_one_judgement),
the key that of its first judge call on accuracy. Bytes are the process's rchar (/proc/self/io):
every byte read through read() or pread(), from the page cache or the disk. PYTHONPATH picks the
code measured (a checkout of another commit, for a before/after). Results in bench/README.md.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import click

from pipeline.llm.recordings import key_reader, stage_folders
from pipeline.llm.recordings.item_reader import read_items
from pipeline.testing.synthetic import audit_one_judgement
from pipeline.tools.audit.calls import iter_calls


def rchar() -> int:
    with open("/proc/self/io", encoding="ascii") as io:
        for line in io:
            if line.startswith("rchar"):
                return int(line.split()[1])
    return 0


def timed(name: str, read: Callable[[], int], repeat: int) -> None:
    """The best of `repeat` reads: CPU s, MB read, calls found."""
    best: tuple[float, int, int] | None = None
    for _ in range(repeat):
        bytes_before, cpu_before = rchar(), time.process_time()
        found = read()
        figures = (time.process_time() - cpu_before, rchar() - bytes_before, found)
        best = figures if best is None or figures[0] < best[0] else best
    assert best is not None
    click.echo(f"{name:<26} CPU {best[0]:6.3f} s  read {best[1] / 2**20:8.1f} MB  calls {best[2]}")


def first_judgement(judge: Path, item: str) -> str:
    """The key of the item's first judge call on accuracy (not timed)."""
    for loaded in read_items(judge, [item]):
        context = loaded.call.context
        if context.step == 0 and context.label("metric") == "accuracy" and context.attempt == 0:
            return loaded.call.record.key
    raise click.ClickException(f"no judge call on accuracy for item {item} in {judge}")


@click.command()
@click.argument("root", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--repeat", type=int, default=3, show_default=True)
def main(root: Path, repeat: int) -> None:
    """ROOT: a synthetic run's folder (bench/million.py --keep)."""
    items = sum(1 for _ in (root / "data").glob("*_P"))
    item, _ = audit_one_judgement(items)
    folder = root / "recordings"
    stages = stage_folders.stage_dirs(folder)
    key = first_judgement(folder / "judge", item)
    click.echo(f"{root}: {items} items, item {item}, key {key}, code {key_reader.__file__}")

    def by_key() -> int:
        return sum(1 for d in stages for _ in key_reader.read_keys(d, [key], verify=False))

    # by item as audit reads them (iter_calls: through the tables of items where a checkout has them)
    def judge_item() -> int:
        return sum(1 for _ in iter_calls(folder, ["judge"], items=[item]))

    def every_item() -> int:
        return sum(1 for _ in iter_calls(folder, items=[item]))

    timed("--key, every stage", by_key, repeat)
    timed("--item, judge stage", judge_item, repeat)
    timed("--item, every stage", every_item, repeat)


if __name__ == "__main__":
    sys.exit(main())
