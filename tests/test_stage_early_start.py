"""A stage sends its first requests while its dry run goes on (stages.runner): the start line still
says what the dry run predicts from the cache as it was when the stage began, before the end line."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pipeline.llm.cache.store import CallStore
from pipeline.llm.keys import request_key
from pipeline.llm.records import CallRecord
from pipeline.llm.types import ChatReply, ModelIdentity
from pipeline.tools.cli import main
from pipeline.tools.status.probe import MARK, ProbeBackend
from stages.runner import run_stage
from tests.helpers import request
from tests.project import one_round_project, rejudge_all


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return one_round_project(tmp_path, monkeypatch)


def predicted(stage: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["status", "--json", "--all"])
    assert result.exit_code == 0, result.output
    [found] = [s for s in json.loads(result.stdout)["stages"] if s["stage"] == stage]
    return found  # type: ignore[no-any-return]


def test_the_start_line_is_the_prediction_from_before_the_stage_sent_anything(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Iteration 1 now re-judges the three metrics that passed: 9 new calls, predicted exactly. The
    # stage starts them as soon as its dry run meets the first, and their replies land in the local
    # cache while the dry run goes on: they must not count as recorded there.
    rejudge_all(project)
    before = predicted("refine")
    assert (before["model_calls"], before["exact"]) == (9, True)
    run_stage("paper", "refine")
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("refine: ")]
    assert len(lines) == 2
    start, end = lines
    # (The stage's line says "at least": its refinements hold the placeholders, status' does not.)
    calls = before["calls"]
    bound = "(at least )?"
    said = rf"refine: {bound}{calls} calls expected \({calls - 9} recorded, {bound}9 for the model\), 3 items"
    assert re.fullmatch(said, start), start
    assert re.search(r"refine: done in .*: 15 calls, 6 hits, 9 misses sent to the model", end), end
    assert predicted("refine")["model_calls"] == 0  # the stage made them, and they are recorded now


def test_a_key_the_stage_has_sent_is_no_local_hit_to_its_dry_run(tmp_path: Path) -> None:
    identity = ModelIdentity(backend="fake", name="m", digest="sha256:" + "0" * 64)
    cache = tmp_path / "cache"
    asked = request("q")
    store = CallStore(cache)
    store.put(CallRecord.new(identity, asked, ChatReply(text="stored since")))
    store.close()
    key = request_key(identity, asked)
    met = threading.Event()
    probe = ProbeBackend(identity, cache, asked=lambda k: k == key, model_call=met)
    assert MARK in probe.chat(asked).text
    assert met.is_set()
    plain = ProbeBackend(identity, cache, model_call=(untouched := threading.Event()))
    assert plain.chat(asked).text == "stored since"
    assert not untouched.is_set()
    probe.close()
    plain.close()
