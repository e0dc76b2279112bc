"""What a stage prints while it runs (pipeline.llm.progress): on a terminal a bar of calls done of
expected with hits, pace and time left; in a pipe only a start line and an end line."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

from pipeline.llm.progress import Expected, StageProgress, clock
from pipeline.llm.records import RecordedCall
from pipeline.llm.types import CallContext
from tests.helpers import make_session, request


def _calls(tmp_path: Path, hits: int, misses: int) -> list[RecordedCall]:
    """`misses` calls answered by the fake model, then `hits` repeats of them served from the cache."""
    session, _ = make_session(tmp_path)
    made = [session.chat(request(f"q{n}"), CallContext(stage="judge", item=str(n))) for n in range(misses)]
    again = [
        session.chat(request(f"q{n % misses}"), CallContext(stage="judge", item="x")) for n in range(hits)
    ]
    session.close()
    return made + again


def test_in_a_pipe_a_stage_prints_one_start_and_one_end_line(tmp_path: Path) -> None:
    stream = io.StringIO()  # not a terminal
    progress = StageProgress("judge", Expected(calls=5, model_calls=2, exact=True, items=2), stream=stream)
    progress.start()
    for call in _calls(tmp_path, hits=3, misses=2):
        progress.call(call)
    progress.finish("0 of 5 judgements unscored")
    lines = stream.getvalue().splitlines()
    assert lines[0] == "judge: 5 calls expected (3 recorded, 2 for the model), 2 items"
    assert lines[1].startswith("judge: done in ")
    assert lines[1].endswith(
        ": 5 calls, 3 hits, 2 misses sent to the model (cache mode auto); 0 of 5 judgements unscored"
    )
    assert len(lines) == 2


def test_a_lower_bound_says_so() -> None:
    expected = Expected(calls=7, model_calls=3, exact=False, items=3)
    assert expected.describe() == "at least 7 calls expected (4 recorded, at least 3 for the model), 3 items"


def test_on_a_terminal_a_bar_shows_calls_done_of_expected_hits_pace_and_time_left(tmp_path: Path) -> None:
    stream = io.StringIO()
    expected = Expected(calls=10, model_calls=6, exact=True, items=2)
    progress = StageProgress("judge", expected, stream=stream, live=True)
    progress.start()
    for call in _calls(tmp_path, hits=2, misses=2):
        progress.call(call)
    progress.refresh()
    drawn = stream.getvalue()
    last = drawn.replace("\r", "\n").splitlines()[-1]
    assert "4/10 calls" in last and "2 hits" in last and "2 to the model" in last and "s/call" in last
    assert "ETA " in last  # 4 model calls still expected, at the pace measured so far
    assert last.endswith("]") and ", , " not in last
    progress.finish()
    assert stream.getvalue().splitlines()[-1].startswith("judge: done in ")


def test_more_calls_than_a_lower_bound_grow_the_bar(tmp_path: Path) -> None:
    stream = io.StringIO()
    progress = StageProgress(
        "judge", Expected(calls=2, model_calls=1, exact=False, items=1), stream=stream, live=True
    )
    progress.start()
    for call in _calls(tmp_path, hits=1, misses=2):
        progress.call(call)
    progress.refresh()
    assert "3/3 calls" in stream.getvalue().replace("\r", "\n").splitlines()[-1]


def test_time_left_comes_from_the_model_calls_alone(tmp_path: Path) -> None:
    progress = StageProgress(
        "judge", Expected(calls=10, model_calls=4, exact=True, items=1), stream=io.StringIO()
    )
    assert progress.eta() is None  # no model call yet: no pace to go by
    progress.model_calls, progress.model_seconds = 2, 30.0
    assert progress.eta() == 30.0  # 2 more model calls at 15 s each; the hits cost nothing
    assert clock(30.0) == "30.0 s" and clock(125) == "2:05" and clock(3723) == "1:02:03"


def test_a_stage_on_a_real_terminal_draws_the_bar(tmp_path: Path) -> None:
    """The bar appears when stderr is a terminal (a pseudo-terminal here), with no option set."""
    code = (
        "from pathlib import Path\n"
        "from pipeline.llm.progress import Expected, StageProgress\n"
        "from tests.test_progress import _calls\n"
        "p = StageProgress('judge', Expected(calls=3, model_calls=2, exact=True, items=1))\n"
        f"p.start(); [p.call(c) for c in _calls(Path({str(tmp_path)!r}), hits=0, misses=2)]; p.refresh()\n"
    )
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 100 columns
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run(
        [sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=follower, env=env, timeout=60
    )
    os.close(follower)
    drawn = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        drawn += chunk
    os.close(leader)
    assert done.returncode == 0
    text = drawn.decode()
    assert "2/3 calls" in text and "2 to the model" in text and "ETA " in text, text
