"""A replay's rewrite of its stage's recording (issue 33): a block line kept from the recording in
another spelling of the same JSON is written as line_format.blob_line writes every block line, so a
rewrite gives the writer's bytes whatever the file held; and a call line is walked for its depth
only when it could nest past the limit, with the walk's verdict."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from pipeline.errors import CorruptRecordError
from pipeline.llm.bounds import MAX_DEPTH, depth_problem
from pipeline.llm.recordings import line_checks, line_format, stage_calls, stage_folders, verified_memo
from pipeline.llm.types import CallContext
from tests.helpers import make_session, request
from tests.test_recordings import TRANSCRIPT

pytestmark = pytest.mark.usefixtures("fresh_memo")


def _asked(transcript: str) -> list[tuple[object, CallContext]]:
    return [
        (request(f"Judge {i}.\n{transcript}"), CallContext(stage="judge", item=f"90{i}")) for i in range(4)
    ]


def _recorded(tmp_path: Path, transcript: str = TRANSCRIPT) -> tuple[Path, list[tuple[object, CallContext]]]:
    asked = _asked(transcript)
    session, _ = make_session(tmp_path, "auto")
    for req, ctx in asked:
        session.chat(req, ctx)  # type: ignore[arg-type]
    session.close()
    return tmp_path / "recordings" / "judge" / stage_folders.CALLS_FILE, asked


def _replayed(tmp_path: Path, asked: list[tuple[object, CallContext]]) -> None:
    verified_memo.forget_in_process()
    replay, backend = make_session(tmp_path, "replay")
    for req, ctx in asked:
        replay.chat(req, ctx)  # type: ignore[arg-type]
    own = replay.index.read_already("judge")
    assert own is not None
    own.blobs.clear_cache()  # as a large stage's blocks are, long let go of when it is written
    replay.close()
    assert backend.calls == []


def _blob_lines_made(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the block lines written from their text from now on."""
    made: list[str] = []
    real = line_format.blob_line

    def counted(blob: str, text: str) -> str:
        made.append(blob)
        return real(blob, text)

    monkeypatch.setattr(stage_calls, "blob_line", counted)
    return made


def _respelled(recorded: Path, respell: bytes) -> bytes:
    """The recording with each block line holding `respell` written in another spelling of the
    same JSON (so the same block, its id still its text's); the canonical bytes before."""
    before = recorded.read_bytes()
    lines = before.split(b"\n")
    changed = 0
    for at, line in enumerate(lines):
        if line.startswith(b'{"blob":') and respell in line:
            entry = orjson.loads(line)
            if respell == b"\\u2028":  # the escape written raw, as a file written before line_safe held it
                lines[at] = line.replace(b"\\u2028", "\u2028".encode())
            else:  # a letter of its text written as an escape
                lines[at] = line.replace(respell, b"\\u0073" + respell[1:])
            assert orjson.loads(lines[at]) == entry
            changed += 1
    assert changed > 0
    recorded.write_bytes(b"\n".join(lines))
    assert recorded.read_bytes() != before
    return before


@pytest.mark.parametrize("respell", [b"sleep", b"\\u2028"], ids=["escaped-letter", "raw-u2028"])
def test_a_block_line_in_another_spelling_is_written_as_blob_line_writes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, respell: bytes
) -> None:
    transcript = TRANSCRIPT.replace("line 7 ", "line\u20287 ") if respell == b"\\u2028" else TRANSCRIPT
    recorded, asked = _recorded(tmp_path, transcript)
    canonical = _respelled(recorded, respell)
    made = _blob_lines_made(monkeypatch)
    _replayed(tmp_path, asked)
    assert made  # the lines respelled were written from their text...
    assert recorded.read_bytes() == canonical  # ...as the writer writes every block line


@pytest.mark.parametrize("levels", [MAX_DEPTH - 2, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, MAX_DEPTH + 5])
def test_a_call_line_is_refused_for_its_depth_exactly_as_the_walk_finds(levels: int) -> None:
    nested: object = "x"
    for _ in range(levels):
        nested = [nested]
    # One object and `levels` arrays, all on one path: as many openings as its depth, so that a
    # bound one too loose lets the first line too deep through unwalked.
    line = orjson.dumps({"deep": nested}).decode()
    assert line.count("{") + line.count("[") == levels + 1
    walked = depth_problem(orjson.loads(line))
    with pytest.raises(CorruptRecordError) as raised:
        line_checks.parse_call_line(line, {}, "calls.jsonl:1")
    assert ("nested more than" in raised.value.message) == (walked is not None)
    assert (walked is not None) == (levels + 1 > MAX_DEPTH)
