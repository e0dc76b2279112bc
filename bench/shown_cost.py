"""What `pipeline.llm.terminal.shown` costs a character, this checkout's against another's, over the
texts of the committed recordings (every prompt, reply and name of 20 characters or more), as they
are and with a backslash put before each (a reply of LaTeX or code takes the backslash path).

    .venv/bin/python bench/shown_cost.py --base /work/main      # 3 alternated rounds, CPU time

Every report page, report.md cell, SVG label and audit text goes through `shown`; the pages show
every prompt and reply of a run.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parents[1]


def _module(root: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, root / "pipeline" / "llm" / "terminal.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _texts() -> list[str]:
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str) and len(value) >= 20:
            found.append(value)
        elif isinstance(value, dict):
            for inner in value.values():
                walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)

    for path in sorted((HERE / "recordings").rglob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                walk(json.loads(line))
            except ValueError:
                continue
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", type=Path, required=True, help="another checkout's root")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    checkouts = {"this": _module(HERE, "terminal_this"), "base": _module(args.base, "terminal_base")}
    plain = _texts()
    sets = {"as recorded": plain, "a backslash each": ["\\" + t for t in plain]}
    chars = sum(map(len, plain))
    print(f"{len(plain)} texts, {chars:,} characters")
    for round_ in range(args.rounds):
        for label, texts in sets.items():
            for name, module in checkouts.items():
                start = time.process_time()
                for _ in range(5):
                    for text in texts:
                        module.shown(text)
                spent = time.process_time() - start
                print(
                    f"round {round_ + 1}  {label:<17} {name:<5} {spent / 5 / chars * 1e9:6.2f} ns a character"
                )


if __name__ == "__main__":
    main()
