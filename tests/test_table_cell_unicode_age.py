"""A name from params or data in a report's Markdown table is written alike on every supported
Python. `table_cell` escapes a `_` that can open or close emphasis, one not between two word
characters (`\\w`); a character added since Unicode 14.0 (a Kawi letter, U+11F04) is no word
character to Python 3.11 and a letter to 3.12 and 3.13, so `a_` + Kawi was written `a\\_` + Kawi on
3.11 and `a_` + Kawi on 3.12: report.md's bytes changed with the Python (fails on 3.12 and 3.13
before the mend; pipeline.judges.unicode_age)."""

from __future__ import annotations

from pipeline.reports.markdown import table_cell

KAWI_A = "\U00011f04"  # Unicode 15.0 (Python 3.12)
CJK_I = "\U0002ebf0"  # Unicode 15.1 (Python 3.13)


def test_a_name_holding_a_character_newer_than_python_3_11_is_written_as_on_3_11() -> None:
    assert table_cell(f"a_{KAWI_A}") == f"a\\_{KAWI_A}"
    assert table_cell(f"{CJK_I}_b") == f"{CJK_I}\\_b"
    assert table_cell(f"{KAWI_A}_{CJK_I}") == f"{KAWI_A}\\_{CJK_I}"
    assert table_cell("source_attribution") == "source_attribution"  # as before: between two letters
    assert table_cell("\U00100000_x") == "\U00100000\\_x"  # a private-use character stays itself
