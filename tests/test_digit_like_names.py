"""A name holding a character str.isdigit() calls a digit but int() cannot read (a superscript `²`,
a subscript `₂`), or one only a newer Unicode calls a digit (a Kawi digit, U+11F54, Unicode 15.0:
a digit to Python 3.12 and 3.13, nothing to 3.11), orders like any other name. SummEval's system
`M²` and an item `3²` in a recording made `isdigit() and int()` raise ValueError: a traceback from
the SummEval stages and from `judgeloop audit`'s "what exists" when a filter matched nothing; and a
system `M` + Kawi digit was ordered as the number 4 on 3.12 and as text on 3.11 (the outputs' order)."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.data.summeval import load_summeval
from pipeline.tools.audit.filters import _natural
from tests.conftest import ROOT

KAWI_FOUR = "\U00011f54"


def test_summeval_systems_named_with_digit_like_characters_are_ordered_alike_everywhere(
    tmp_path: Path,
) -> None:
    lines = (ROOT / "data" / "summeval-demo" / "summeval-demo.jsonl").read_text(encoding="utf-8").splitlines()
    renamed = {"D1": "M2", "D2": "M²", "D3": f"M{KAWI_FOUR}", "D4": "M10"}
    rows = [json.loads(line) for line in lines]
    for row in rows:
        row["model_id"] = renamed[row["model_id"]]
    path = tmp_path / "summeval.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    # numbers (ASCII digits) in numeric order, then every other name as text, on every Python
    assert load_summeval(path).systems == ["M2", "M10", "M²", f"M{KAWI_FOUR}"]


def test_audit_s_natural_order_reads_only_ascii_digits_as_numbers() -> None:
    names = ["item-10", "item-2", "item-3²", f"item-{KAWI_FOUR}", "CO₂"]
    assert sorted(names, key=_natural) == ["CO₂", "item-2", "item-3²", "item-10", f"item-{KAWI_FOUR}"]
