"""Warnings printed by a stage or a command are shown safely (issue 28): they quote what others
wrote (a server's error text in a retry line, an item id or a file name from the data), and the
logging and warnings modules printed it raw, escapes and carriage returns included."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT

HOSTILE = "\\x1b]0;owned\\x07\\x1b[2J\\rfake line\\u202e"

# The entry point runs first (and fails, or prints its help); then a stage's kind of warnings. The
# warning's text is built at run time: Python 3.13 prints the source line of a `-c` warning too, and
# that line must not quote the hostile text a second time (escaped, it would count once more).
SCRIPT = f"""
import logging, warnings
hostile = "{HOSTILE}"
{{entry}}
try:
    entry(args, standalone_mode=False)
except BaseException:
    pass
logging.getLogger("pipeline.llm.backends.http_errors").warning("attempt 1 failed (HTTP 500: %s)", "{HOSTILE}")
logging.getLogger("pipeline.llm.asking").warning("item {HOSTILE}: the model's reply was empty")
warnings.warn("transcripts/" + hostile + ".csv: skipped", UserWarning)
"""
ENTRIES = {
    "stage runner": "from stages.runner import main as entry\nargs = ['no-such-design', 'x']",
    "judgeloop": "from pipeline.tools.cli import main as entry\nargs = ['status', '--help']",
}


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_a_warning_quoting_escapes_reaches_the_terminal_escaped(entry: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(entry=ENTRIES[entry])],
        cwd=ROOT,
        capture_output=True,
        timeout=120,
        check=True,
    )
    err = done.stderr.decode("utf-8")
    assert "\x1b" not in err and "\r" not in err and "\x07" not in err and "\u202e" not in err, err
    assert err.count("\\x1b]0;owned\\x07\\x1b[2J\\rfake line\\u202e") == 3, err
