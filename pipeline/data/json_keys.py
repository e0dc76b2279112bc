"""JSON a person gave us, with each object's keys given once, or an error naming the key.

Python's json, orjson and pydantic's parser all keep the last value of a key given twice in one
object, silently: `{"id": "301", "turns": [...], "id": "302"}` reads as interview 302, and a person
reading the line (or another tool, which may keep the first) sees 301. So every reader of a JSON
data file a person gave us (pipeline.data.input_files.json_objects: RAG rows, human ratings, a RAG
batch; a JSONL transcript; SummEval's annotations; a batch job's results) refuses such a line, and
its error names the file, the line, the key and the fix, as a YAML file's does
(pipeline.llm.params_errors.duplicate_keys).

Recordings, the cache and a batch export's manifest are not read through this: what they serve is
what their hash checks (a key re-derived from the request as parsed, a checksum of the record as
parsed), so a repeated key there cannot change what is served, and their readers keep their speed.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from pipeline.llm.project_files import quoted

REPEATED_FIX = "keep the key once in each object (decide which of the two values is meant)"
SHOWN_CHARS = 80  # of a key or an id from someone's file, in a message


def shown(text: str) -> str:
    """Text from someone's file (a key, an id) as a message shows it: its repr, so that no control
    character reaches the terminal, cut at SHOWN_CHARS characters (a key may be a whole line long)."""
    if len(text) <= SHOWN_CHARS:
        return repr(text)
    return f"{text[:SHOWN_CHARS]!r}... ({len(text):,} characters)"


class RepeatedKey(ValueError):
    """A key given twice in one JSON object."""

    def __init__(self, key: str) -> None:
        super().__init__(f"the key {shown(key)} is given twice in one object")
        self.key = key


def unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json's object_pairs_hook: the object as a dict, or RepeatedKey for its first repeated key."""
    made = dict(pairs)
    if len(made) < len(pairs):
        raise RepeatedKey(_first_repeated(pairs))
    return made


def _checked_only(pairs: list[tuple[str, Any]]) -> None:
    """unique_pairs without building the object: for a text another parser reads."""
    if len(pairs) > 1 and len({key for key, _ in pairs}) < len(pairs):
        raise RepeatedKey(_first_repeated(pairs))


def _first_repeated(pairs: list[tuple[str, Any]]) -> str:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            return key
        seen.add(key)
    raise AssertionError("no key is repeated")  # pragma: no cover - called only when one is


def loads_unique(text: str | bytes) -> Any:
    """json.loads(text), or RepeatedKey where an object gives a key twice (a JSONDecodeError and
    a RecursionError as json.loads raises them). A number of more digits than Python turns into an
    int (sys.get_int_max_str_digits, 4,300) is a JSONDecodeError at the number, where json.loads
    raised a bare ValueError that its callers let through as a traceback."""
    try:
        return json.loads(text, object_pairs_hook=unique_pairs)
    except (RepeatedKey, json.JSONDecodeError):
        raise
    except ValueError:
        shown = text if isinstance(text, str) else text.decode("utf-8", "replace")
        limit = sys.get_int_max_str_digits()
        found = re.search(rf"\d{{{limit + 1},}}", shown) if limit else None
        if found is None:
            raise
        raise json.JSONDecodeError(f"a number of more than {limit:,} digits", shown, found.start()) from None


def repeated_key(text: str | bytes) -> str | None:
    """The first key given twice in one object of the JSON `text` (objects in the order they close:
    the innermost first), or None; for a text another parser (orjson, pydantic) reads, which keeps
    the last silently. A text json cannot read is that parser's to refuse: None."""
    try:
        json.loads(text, object_pairs_hook=_checked_only)
    except RepeatedKey as exc:
        return exc.key
    except (ValueError, RecursionError):
        return None
    return None


def repeated_problem(key: str, file: str) -> str:
    """The message for a key repeated in the file named `file` (the key quoted only inside the
    project, cut at SHOWN_CHARS characters)."""
    return (
        f"the key {quoted(file, shown(key))} is given twice in one object, and a JSON reader keeps "
        "one of the two silently (Python's, the last)"
    )
