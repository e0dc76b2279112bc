"""How a canonical call line opens: its checksum, then its context (canonical JSON, keys sorted).
StageIndex finds the line that records a call by that opening alone, without parsing it
(StageIndex.verbatim_at, kept_at), except a line that opens so but holds another checksum or
context further on (misopened), which only a parse can settle.
"""

from __future__ import annotations

from typing import Any

import orjson

from pipeline.llm.keys import canonical_json
from pipeline.llm.recordings import line_format


def opening_of(checksum: str, context: Any) -> str:
    """How a canonical call line of this checksum and context (as JSON) opens, in line_safe's form."""
    return line_format.line_safe(_opens(checksum, context))


def _opens(checksum: str, context: Any) -> str:
    return f'{{"checksum":"{checksum}","context":{canonical_json(context)},'


def misopened(line: str, raw: Any) -> bool:
    """Whether the line opens as a canonical call line does, but with another checksum or context
    than it holds: JSON lets an object name a member twice, and a parse (verification's too) reads
    the last, so `{"checksum":A,"context":X,...,"checksum":B,...}` is verified as B's. StageIndex
    finds a line by its opening only where this is False (StageIndex._opening). `raw`: the line as JSON, where
    read already."""
    if not line.startswith('{"checksum":'):
        return False  # opens otherwise: no opening StageIndex._opening looks for can match it
    try:
        held = orjson.loads(line) if raw is None else raw
        own = _opens(held["checksum"], held["context"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return True
    if line.startswith(own):
        return False  # as the writer writes a line (then its line_safe form opens with own's too)
    safe = line_format.line_safe(own)
    return not line_format.line_safe(line[: len(safe)]).startswith(safe)  # (a char maps to 1 or more)
