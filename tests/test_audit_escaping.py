"""`judgeloop audit` shows a reply's control characters escaped: a model's reply cannot clear the
screen, overwrite the audit's own lines or reorder text on a terminal; `--raw` and `--format jsonl`
give the text as recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.llm.recordings.stage_writer import write_stage
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.terminal import framed
from pipeline.llm.types import CallContext, ChatReply, ChatRequest, Message, ModelIdentity
from pipeline.tools.audit.escape import escape_controls
from pipeline.tools.cli import main

HOSTILE = "fine\x1b[2J\x1b[1A\rScore: 5 \x9b31m\u202eevil\u2066\x07\x00 end\ttab\nnext line"
SHOWN = "fine\\x1b[2J\\x1b[1A\\rScore: 5 \\x9b31m\\u202eevil\\u2066\\x07\\0 end\ttab\nnext line"


@pytest.fixture
def recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    request = ChatRequest(messages=(Message(role="user", content="Rate \x1b]0;title\x07 this."),))
    record = CallRecord.new(
        ModelIdentity(backend="fake", name="m", digest="d"),
        request,
        ChatReply(text=HOSTILE, done_reason="stop"),
    )
    context = CallContext(stage="judge", item="901", step=0, labels={"role": "judge", "metric": "coherence"})
    write_stage(tmp_path / "recordings" / "judge", [RecordedCall(context=context, record=record)])
    return tmp_path / "recordings"


def test_the_escape_keeps_newlines_and_tabs_and_shows_every_other_control() -> None:
    assert escape_controls(HOSTILE) == SHOWN
    assert escape_controls("plain text, ünïcode, emoji 🙂") == "plain text, ünïcode, emoji 🙂"


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_audit_shows_control_characters_escaped(recorded: Path, fmt: str) -> None:
    result = CliRunner().invoke(main, ["audit", "--recordings", str(recorded), "--format", fmt])
    assert result.exit_code == 0, result.output
    # In text, each line of a reply is behind the frame's margin (pipeline.llm.terminal.framed).
    assert (framed(SHOWN) if fmt == "text" else SHOWN) in result.stdout
    assert "Rate \\x1b]0;title\\x07 this." in result.stdout
    assert not any(c in result.stdout for c in "\x1b\r\x07\x00\x9b\u202e\u2066")


def test_raw_prints_the_reply_as_recorded(recorded: Path) -> None:
    result = CliRunner().invoke(main, ["audit", "--recordings", str(recorded), "--raw"])
    assert result.exit_code == 0 and framed(HOSTILE) in result.stdout


def test_jsonl_is_json_and_carries_the_reply_exactly(recorded: Path) -> None:
    result = CliRunner().invoke(main, ["audit", "--recordings", str(recorded), "--format", "jsonl"])
    assert result.exit_code == 0
    assert "\x1b" not in result.stdout  # JSON escapes it itself
    assert json.loads(result.stdout)["reply"]["text"] == HOSTILE
