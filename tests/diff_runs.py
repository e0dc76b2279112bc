"""What the tests of `judgeloop diff` on one design share: the command's --json answer, each
judgement's last reply read from the recordings directly, and the check that the diff's counts
equal the counts made from those replies."""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from click.testing import CliRunner

from pipeline.llm.recordings.stage_reader import LoadedCall
from pipeline.tools.cli import main

K = TypeVar("K", bound=Hashable)


def diff_json(a: Path, b: Path, design: str, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["diff", str(a), str(b), "--json", "--design", design, *args])
    assert result.exit_code == 0, result.output
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def last_replies(calls: Iterable[LoadedCall], key: Callable[[LoadedCall], K | None]) -> dict[K, str]:
    """Each judgement's reply at its last attempt, by `key` (None: not a judgement's call)."""
    last: dict[K, tuple[int, str]] = {}
    for loaded in calls:
        found = key(loaded)
        if found is None:
            continue
        attempt = loaded.call.context.attempt
        if found not in last or attempt >= last[found][0]:
            last[found] = (attempt, loaded.call.record.reply.text)
    return {found: text for found, (_, text) in last.items()}


def assert_counted_as_recorded(
    found: dict[str, Any],
    cause: str,
    old: Mapping[K, object],
    new: Mapping[K, object],
    metric_of: Callable[[K], str],
    skip: Iterable[str] = (),
) -> None:
    """Each metric's pairs and changes (all on `cause`) as the two runs' recorded replies count them."""
    for metric in found["metrics"]:
        if metric["metric"] in skip:
            continue
        common = [k for k in old.keys() & new.keys() if metric_of(k) == metric["metric"]]
        assert metric["paired"] == len(common)
        assert metric["changed"] == sum(old[k] != new[k] for k in common) == metric["causes"][cause]
