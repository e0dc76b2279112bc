"""`judgeloop diff` breaks a text into lines at "\\n" only, in every view: the terminal's `--item`
diff, the HTML page's marked lines, and the line counts of a prompt change that the JSON and the
terminal give as the cause. str.splitlines also breaks at \\r, \\x0b, \\x0c, \\x1c-\\x1e, \\x85, U+2028
and U+2029, so a diff split by it showed a line break, and a changed line, where the text has none."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.terminal import shown_line
from pipeline.llm.types import CallContext, ChatReply, ChatRequest, Message, ModelIdentity
from pipeline.tools.audit.diff import diff_iterations, unified
from pipeline.tools.cache.merge_command import _reply_diff
from pipeline.tools.cli import main
from pipeline.tools.diff.causes import prompt_change
from pipeline.tools.diff.text import prompt_text as text_prompt
from pipeline.tools.diff.text import unified as text_unified
from tests.report_dom import Page
from tests.test_diff import diff_json, opening_with, record

# One line of a reply, holding every character but "\n" at which str.splitlines breaks.
ONE_LINE = "Reasons:\rbelow\x0bthe\x0cline\x1cbut\x1dstill\x1eone\x85line\u2028of\u2029text"


def broken(model: str) -> Callable[[ChatRequest], str]:
    """responder, its judge replies opening with ONE_LINE."""
    return opening_with(model, f"{ONE_LINE}\n")


@pytest.fixture(scope="module")
def runs() -> Iterator[tuple[Path, Path, str]]:
    with tempfile.TemporaryDirectory(prefix="judgeloop-diff-lines-") as tmp:
        a = record(Path(tmp) / "a", "judge-a")
        b = record(Path(tmp) / "b", "judge-b", responder_of=broken)
        yield a, b, diff_json(a, b)["changes"][0]["item"]


def test_the_terminal_diff_shows_the_line_as_one_added_line(runs: tuple[Path, Path, str]) -> None:
    a, b, item = runs
    result = CliRunner().invoke(main, ["diff", str(a), str(b), "--design", "paper", "--item", item])
    assert result.exit_code == 0, result.output
    lines = result.output.split("\n")
    assert "+" + shown_line(ONE_LINE) in lines, result.output
    assert not any(line.startswith("+below") or line.startswith("+text") for line in lines)


def test_the_page_marks_the_line_as_one_added_line(runs: tuple[Path, Path, str], tmp_path: Path) -> None:
    a, b, _ = runs
    out = tmp_path / "page"
    result = CliRunner().invoke(main, ["diff", str(a), str(b), "--design", "paper", "--html", str(out)])
    assert result.exit_code == 0, result.output
    page = Page((out / "index.html").read_text(encoding="utf-8"))
    added = [e.text() for e in page.root.walk() if e.tag == "span" and "added" in e.attrs.get("class", "")]
    assert shown_line(ONE_LINE) in added
    assert not any(line.startswith("below") for line in added)


def _asked(content: str) -> RecordedCall:
    request = ChatRequest(messages=(Message(role="user", content=content),))
    identity = ModelIdentity(backend="fake", name="m", digest="d")
    record = CallRecord.new(identity, request, ChatReply(text="Score: 3", done_reason="stop"))
    return RecordedCall(context=CallContext(stage="judge", item="901", step=0), record=record)


def test_a_prompt_change_counts_lines_broken_at_newlines_only() -> None:
    """The cause's detail (`why:` in the terminal, `detail` in --json): one line changed, not a line
    that str.splitlines cut in two."""
    before = _asked("Rate this.\nfirst\u2028second half\nthe end")
    after = _asked("Rate this.\nfirst second half\nthe end")
    assert prompt_change(before, after) == "message 1 (user): +1 −1 lines"


def test_audit_s_iteration_diff_breaks_lines_at_newlines_only() -> None:
    """`judgeloop audit diff ITEM --from A --to B` (pipeline.tools.audit.diff): the same rule."""
    found = unified("reply", "same\nfirst\u2028half\n", "same\nfirst\u2028other\n", ("A", "B"), 3)
    assert found.split("\n")[-3:] == ["-first\u2028half", "+first\u2028other", ""]


def test_cache_merge_s_reply_diff_breaks_lines_at_newlines_only_and_shows_them_exactly() -> None:
    """`judgeloop cache merge`'s conflict diff (pipeline.tools.cache.merge_command), the same rules."""
    found = _reply_diff("same\nfirst\u2028half\n", "same\nfirst\u2028\\u2028half\n")
    assert found[-2:] == ["    -first\\u2028half", "    +first\\u2028\\\\u2028half"]


def test_a_line_break_added_at_a_text_s_end_counts_as_the_views_show_it() -> None:
    """One line added in every view (review9): the `why:`/`detail` counts (+0 −0 before, where the
    terminal's and the page's diff showed an added line), and `audit diff`'s reply (`-a`, `+a`
    before: two lines that read the same, where `judgeloop diff` showed one added)."""
    before, after = _asked("Rate this.\nthe end"), _asked("Rate this.\nthe end\n")
    assert prompt_change(before, after) == "message 1 (user): +1 −0 lines"
    shown = text_unified("prompt", text_prompt(before), text_prompt(after))
    assert [line[0] for line in shown[3:] if line[:1] in ("+", "-")] == ["+"]
    calls = [
        RecordedCall(
            context=CallContext(
                stage="assess", item="901", step=step, labels={"role": "assess" if step == 0 else "refine"}
            ),
            record=CallRecord.new(
                ModelIdentity(backend="fake", name="m", digest="d"),
                ChatRequest(messages=(Message(role="user", content="Write."),)),
                ChatReply(text="the end" + "\n" * step, done_reason="stop"),
            ),
        )
        for step in (0, 1)
    ]
    reply = diff_iterations(calls, "901", 0, 1, None).split("### assessment reply\n")[1]
    assert [
        line for line in reply.split("\n") if line[:1] in ("+", "-") and line[:3] not in ("+++", "---")
    ] == ["+"]
