"""A batch export's manifest is read with the bounds of every other reader (issue 28): a line nested
deeper than judgeloop writes is refused, naming the file and the line, before anything walks it (a
RecursionError in its key, or a record stored that the recordings' reader would refuse), and a line
past the length bound is never read whole."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from pipeline.errors import CorruptRecordError
from pipeline.llm.bounds import MAX_DEPTH, MAX_LINE_BYTES
from pipeline.llm.keys import request_key
from pipeline.llm.types import ChatRequest, ModelIdentity
from pipeline.tools.batch.manifest import MANIFEST_FILE, Manifest
from tests.test_batch import exported  # noqa: F401  (the fixture: an export of two calls)


def nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"a": value}
    return value


@pytest.mark.parametrize("levels", [MAX_DEPTH + 10, 1000])
def test_a_manifest_line_nested_too_deep_is_refused_naming_its_line(exported: Path, levels: int) -> None:  # noqa: F811
    path = exported / MANIFEST_FILE
    lines = path.read_text(encoding="utf-8").splitlines()
    entry = json.loads(lines[1])
    identity = ModelIdentity.model_validate(entry["model"])
    entry["request"]["format"] = nested(levels)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(10_000)  # a forger's own machine: the key matches the deep request
    try:
        entry["custom_id"] = request_key(identity, ChatRequest.model_validate(entry["request"]))
        lines[1] = json.dumps(entry)
    finally:
        sys.setrecursionlimit(limit)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(
        CorruptRecordError, match=rf"{MANIFEST_FILE}:2: .*nested more than {MAX_DEPTH} levels"
    ):
        Manifest(exported, identity)


def test_a_manifest_line_past_the_length_bound_is_refused_naming_its_line(exported: Path) -> None:  # noqa: F811
    path = exported / MANIFEST_FILE
    first, second = path.read_text(encoding="utf-8").splitlines()
    identity = ModelIdentity.model_validate(json.loads(first)["model"])
    path.write_text(f"{first}\n{' ' * MAX_LINE_BYTES}{second}\n", encoding="utf-8")
    with pytest.raises(
        CorruptRecordError, match=rf"{MANIFEST_FILE}:2: .*longer than {MAX_LINE_BYTES:,} bytes"
    ):
        Manifest(exported, identity)
