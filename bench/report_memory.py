"""What the paper's aggregate stage (the report) holds per item when its last item page is written:
its peak RSS, and bytes an item of each structure kept until the index page is written.

    cd PROJECT && PYTHONPATH=CODE /path/to/.venv/bin/python /path/to/bench/report_memory.py

PROJECT is a project of bench/million.py's generator (make_project, then `bench/million.py stages
PROJECT auto`); CODE is the judgeloop checkout whose pipeline/ and stages/ run (this one, or an
exported main for a before/after). The stage runs in this process as DVC runs it, its outputs
written as usual (compare their sha256 between checkouts). Printed (stderr), per item: the index
page's text, the index's rows, the calls seen (a set of keys before bench/README.md's "The report's
memory", a byte a call after), the page stems taken, and each stage's recording index (its call
lines, its keys' places, its blocks' lines and places: arrays).
"""

from __future__ import annotations

import contextlib
import resource
import sys
from array import array
from pathlib import Path
from typing import Any

sys.argv = ["stages", "paper", "aggregate"]
sys.path.insert(0, ".")

import pipeline.experiments.paper.report.html as html  # noqa: E402

held: dict[str, Any] = {}
_init = html._IndexScan.__init__


def _kept(self: Any, records: Any, folder: str) -> None:
    _init(self, records, folder)
    held["scan"], held["records"] = self, records


def deep(o: object, seen: set[int] | None = None) -> int:
    """sys.getsizeof of `o` and of what it holds (containers, dataclasses, slots)."""
    seen = set() if seen is None else seen
    if id(o) in seen:
        return 0
    seen.add(id(o))
    size = sys.getsizeof(o)
    if isinstance(o, dict):
        size += sum(deep(k, seen) + deep(v, seen) for k, v in o.items())
    elif isinstance(o, list | tuple | set | frozenset):
        size += sum(deep(x, seen) for x in o)
    elif hasattr(o, "__dict__") and not isinstance(o, type):
        size += deep(vars(o), seen)
    elif hasattr(o, "__slots__"):
        size += sum(deep(getattr(o, a), seen) for a in o.__slots__ if hasattr(o, a))
    return size


def _arrays(o: object) -> int:
    return sum(sys.getsizeof(v) for v in vars(o).values() if isinstance(v, array | bytearray))


def _report(items: int, index_html: str) -> None:
    scan = held["scan"]
    seen = deep(scan._seen) + deep(getattr(scan, "_marks", {}))
    say = f"items {items}: index page {len(index_html) / items:.0f} B, rows {deep(scan.rows) / items:.0f} B, "
    say += f"calls seen {seen / items:.0f} B, stems {deep(scan._stems._taken) / items:.0f} B an item"
    print(say, file=sys.stderr)
    for stage, index in getattr(held["records"], "indexes", {}).items():
        lines, blocks = index.lines, index.blobs.table
        total = _arrays(lines) + _arrays(index.at) + _arrays(blocks) + _arrays(index.blobs.at)
        print(
            f"  {stage}: {len(lines)} calls, {len(blocks)} blocks: {total / items:.0f} B an item",
            file=sys.stderr,
        )


_write_pages = html.write_pages  # type: ignore[attr-defined]


def _write(index: Path, index_html: str, pages: Any, count: int) -> Path:
    # The pages of a share each (pipeline.reports.page_shares): this process's peak is the one reported.
    folder = _write_pages(index, index_html, pages, count)
    _report(max(count, 1), index_html)
    return folder


html._IndexScan.__init__ = _kept  # type: ignore[method-assign]
html.write_pages = _write  # type: ignore[attr-defined]

from stages.runner import main  # noqa: E402

with contextlib.suppress(SystemExit):
    main()
usage = resource.getrusage(resource.RUSAGE_SELF)
print(
    f"CPU {usage.ru_utime + usage.ru_stime:.1f} s, peak RSS {usage.ru_maxrss / 1024:.1f} MB", file=sys.stderr
)
