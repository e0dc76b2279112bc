"""RAG rows: a question, the answer to judge, what was retrieved for it, and human labels if any.

One JSON object per line. Our own format (the committed demo, `judgeloop judge-evaluate --batch`):

    {"id": "q1", "question": "...", "answer": "...", "contexts": ["passage", ...],
     "source_ids": ["doc-3", ...], "labels": {"answer_faithfulness": 1}}

`contexts` holds the retrieved passages' text, `source_ids` their identifiers (either may be
empty); `labels` holds binary or graded human judgements by name. The ARES human-annotated test
set, as normalised in ../shared/corpora/rag-ares (`row_id`, `context`, `sources`,
`human_context_relevance`, ...), is read as is: a row with a `row_id` is an ARES row.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pipeline.data.input_files import json_objects
from pipeline.data.item_ids import FORMULA_FIX, composed, formula_problem
from pipeline.errors import InputError

ROW_FIX = "give it id, question and answer (and contexts, source_ids, labels if known)"
EXAMPLE_ROW = (
    '{"id": "q1", "question": "...", "answer": "...", "contexts": ["passage"], "source_ids": ["doc-3"]}'
)
# A line that is no JSON object (a CSV's header, say): the fields a row needs, and an example.
NOT_JSON_FIX = (
    "write one JSON object per line (JSONL, not CSV) with the fields id, question, answer and, if "
    f"known, contexts, source_ids, labels; e.g. {EXAMPLE_ROW}"
)
ARES_LABELS = ("context_relevance", "answer_faithfulness", "answer_relevance")


class RagRow(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    answer: str
    contexts: tuple[str, ...] = ()
    source_ids: tuple[str, ...] = ()
    labels: dict[str, int] = Field(default_factory=dict)


# This format's fields that an ARES row (one with a row_id) spells otherwise: given beside row_id,
# the ARES reading took its own (row_id, context, sources, human_*) and dropped these silently.
_OURS_NOT_ARES = ("id", "contexts", "source_ids", "labels")


def _from_ares(raw: dict[str, Any]) -> dict[str, Any]:
    if (ours := next((key for key in _OURS_NOT_ARES if key in raw), None)) is not None:
        raise ValueError(
            f"row_id (ARES's id) and {ours!r} (this format's) are both given: the row mixes two layouts"
        )
    row_id = raw["row_id"]
    if isinstance(row_id, bool) or not isinstance(row_id, int | str):  # true, 1.0: "True", "1.0"
        raise ValueError(f"row_id is {type(row_id).__name__}, not a whole number or text")
    return {
        "id": str(row_id),
        "question": raw["question"],
        "answer": raw["answer"],
        "contexts": [raw["context"]] if raw.get("context") else [],
        "source_ids": [raw["sources"]] if raw.get("sources") else [],
        "labels": {
            name: raw[f"human_{name}"] for name in ARES_LABELS if raw.get(f"human_{name}") is not None
        },
    }


def rag_row_from(raw: dict[str, Any]) -> RagRow:
    """One parsed JSON object as a RagRow (our format, or an ARES row); raises ValueError saying why."""
    try:
        return RagRow.model_validate(_from_ares(raw) if "row_id" in raw else raw)
    except (ValueError, KeyError) as exc:  # a ValidationError is a ValueError
        raise ValueError(f"not a RAG row ({_why(exc)})") from exc


def load_rag_rows(path: Path, *, only: str | None = None, limit: int | None = None) -> list[RagRow]:
    """The rows of a JSONL file, in file order. `only` keeps the rows whose flag of that name is
    true (ARES: `in_v1_1_filtered`, the 111 annotated rows); `limit` keeps the first N after that."""
    shown = str(path)
    if not path.is_file():
        raise InputError(shown, None, "no such file", "point the rows parameter at a JSONL file of RAG rows")
    rows: list[RagRow] = []
    seen: dict[str, tuple[int, str]] = {}  # by id in its composed form: its line, the id as spelled
    for number, raw in json_objects(path, shown):
        if isinstance(raw, str):
            raise InputError(shown, number, raw, NOT_JSON_FIX)
        if only is not None and not _flagged(raw, only, shown, number):
            continue
        try:
            row = rag_row_from(raw)
        except ValueError as exc:
            raise InputError(shown, number, str(exc), ROW_FIX) from exc
        if (formula := formula_problem(row.id, shown)) is not None:
            raise InputError(shown, number, formula, FORMULA_FIX)
        if (key := composed(row.id)) in seen:
            raise InputError(shown, number, _again(row.id, *seen[key]), "make ids unique")
        seen[key] = (number, row.id)
        rows.append(row)
        if limit is not None and len(rows) >= limit:
            break
    if not rows:
        raise InputError(
            shown, None, "no rows" + (f" with {only} true" if only else ""), "add rows, or check the filter"
        )
    return rows


def _flagged(raw: dict[str, Any], only: str, shown: str, number: int) -> bool:
    """Whether the row's flag `only` (taken out of it) is true; absent or null (pandas writes a
    missing value so) is false. Another flag is refused: the text "false", read as true, kept the
    row (ARES's flags are booleans)."""
    flag = raw.pop(only, None)
    if flag is None:
        return False
    if not isinstance(flag, bool):
        problem = f"the flag {only!r} is {type(flag).__name__}, not true or false"
        raise InputError(shown, number, problem, f"write {only!r} as true or false (JSON, unquoted)")
    return flag


def _again(item_id: str, line: int, first: str) -> str:
    """Why a row's id is refused: an earlier row's on `line` is `first`, the same or a look-alike."""
    if item_id == first:
        return f"id {item_id} is already used on line {line}"
    return f"id {item_id!r} looks the same as {first!r} on line {line}: one name in two Unicode spellings"


def _why(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"missing {exc}"
    if not isinstance(exc, ValidationError):
        return str(exc)
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'row'}: {err['msg']}"
        for err in exc.errors(include_url=False)[:3]
    )
