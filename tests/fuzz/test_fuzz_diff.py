"""Fuzzing what `judgeloop diff` reads of another person's run: its recordings folder, as a hostile
colleague could hand it over (edited recordings, odd and look-alike names, links that point out of
the folder, bytes that are not UTF-8, very long lines). The property of tests/fuzz/support.py, and
one more: the diff opens no file outside the run's folder, whatever links the folder holds.

Run A is the committed run, copied; run B is the same run with its recordings folder attacked."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import event, given
from hypothesis import strategies as st

from pipeline.llm.bounds import MAX_LINE_BYTES
from pipeline.llm.recordings.stage_folders import CALLS_FILE, LEGACY_BLOBS_FILE
from pipeline.tools.cli import main
from pipeline.tools.diff.runs import read_run
from tests.fuzz.support import ROOT, clear_or_correct, committed, encoded, fuzz, inputs, mixed_texts

STAGES = sorted(p.name for p in (ROOT / "recordings").iterdir() if (p / CALLS_FILE).is_file())
SEEDS = [
    committed(f"recordings/{stage}/{CALLS_FILE}")
    for stage in ("judge", "select_score", "rag_judge", "summeval_judge")
]
# Names a reader could take for a stage's recording or folder, or that break a naive one.
LOOKALIKE_FILES = [
    f"{CALLS_FILE}.tmp",
    f"{CALLS_FILE}~",
    f".{CALLS_FILE}",
    f"{CALLS_FILE} ",
    "Calls.jsonl",
    "calls\u200b.jsonl",
    "calls.json",
    LEGACY_BLOBS_FILE,
]
LOOKALIKE_STAGES = [
    "judge ",
    "judge\u200b",
    "JUDGE",
    "judge.",
    "-judge",
    "judge\n",
    "\u0458udge",
    "judge\udcff",
]


# -- which files the diff opens -------------------------------------------------------------------

_opened: list[str] | None = None


def _audit(event_name: str, args: tuple[Any, ...]) -> None:
    if event_name == "open" and _opened is not None and isinstance(args[0], str | bytes | os.PathLike):
        _opened.append(os.path.realpath(os.fsdecode(args[0])))


sys.addaudithook(_audit)  # audit hooks cannot be removed: this one records only while _opened is set


def opening(read: Callable[[], Any]) -> list[str]:
    """The real paths of the files `read` opened (any outcome)."""
    global _opened
    _opened = []
    try:
        clear_or_correct(read)
        return _opened
    finally:
        _opened = None


# -- the runs -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs(sandbox: Path) -> Iterator[tuple[Path, Path, Path]]:
    """Run A, run B (its recordings reset by each example) and a folder outside both, which holds
    a stage recording and a lone calls file for the links to point at."""
    a, b, outside = sandbox / "a", sandbox / "b", sandbox / "outside"
    for run in (a, b):
        run.mkdir()
        shutil.copy(ROOT / "params.yaml", run / "params.yaml")
        shutil.copytree(ROOT / "outputs", run / "outputs")
    shutil.copytree(ROOT / "recordings", a / "recordings")
    (outside / "judge").mkdir(parents=True)
    shutil.copy(ROOT / "recordings" / "judge" / CALLS_FILE, outside / "judge" / CALLS_FILE)
    shutil.copy(ROOT / "recordings" / "judge" / CALLS_FILE, outside / CALLS_FILE)
    yield a, b, outside


def _name_ok(name: str) -> bool:
    try:
        encodedname = os.fsencode(name)
    except UnicodeError:
        return False
    return name not in ("", ".", "..") and b"/" not in encodedname and b"\0" not in encodedname


names = st.one_of(st.sampled_from(LOOKALIKE_STAGES), st.text(min_size=1, max_size=24)).filter(_name_ok)


def _plain(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _link_out(recordings: Path, outside: Path, stage: str, link: str) -> None:
    folder = recordings / stage
    links = {  # where the link goes, and where it points
        "stage": (folder, outside / "judge"),
        "calls": (folder / CALLS_FILE, outside / CALLS_FILE),
        "blobs": (folder / LEGACY_BLOBS_FILE, outside / CALLS_FILE),
        "new stage": (recordings / "judge_copy", outside / "judge"),
        "recordings": (recordings, outside),
        "dangling": (recordings / "gone", outside / "no such folder"),
        "loop": (recordings / "loop", recordings / "loop"),
    }
    path, target = links[link]
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()
    path.symlink_to(target)


def _edit(recordings: Path, outside: Path, stage: str, data: bytes) -> None:
    if _plain(recordings / stage):
        (recordings / stage / CALLS_FILE).unlink(missing_ok=True)
        (recordings / stage / CALLS_FILE).write_bytes(data)


def _odd_stage(recordings: Path, outside: Path, name: str, data: bytes) -> None:
    if not os.path.lexists(recordings / name):
        (recordings / name).mkdir()
        (recordings / name / CALLS_FILE).write_bytes(data)


def _lookalike(recordings: Path, outside: Path, stage: str, name: str, data: bytes) -> None:
    if _plain(recordings / stage):
        (recordings / stage / name).unlink(missing_ok=True)
        (recordings / stage / name).write_bytes(data)


def _links(recordings: Path, outside: Path, stage: str, link: str) -> None:
    if _plain(recordings / stage):
        _link_out(recordings, outside, stage, link)


def _long_line(recordings: Path, outside: Path, stage: str, size: int, where: int, piece: bytes) -> None:
    path = recordings / stage / CALLS_FILE
    if _plain(recordings / stage) and path.is_file() and not path.is_symlink():
        lines = path.read_bytes().split(b"\n")
        lines.insert(min(where, len(lines)), piece + b"x" * size)
        path.write_bytes(b"\n".join(lines))


def _context(recordings: Path, outside: Path, stage: str, line: int, field: str, value: Any) -> None:
    """A call line whose context (unhashed: where the call was made) says something else."""
    path = recordings / stage / CALLS_FILE
    if not (_plain(recordings / stage) and path.is_file() and not path.is_symlink()):
        return
    lines = path.read_bytes().split(b"\n")
    calls = [n for n, text in enumerate(lines) if text and not text.startswith(b'{"blob":')]
    if not calls:
        return
    at = calls[line % len(calls)]
    try:
        call = json.loads(lines[at])
        if field == "whole":
            call["context"] = value
        else:
            call["context"][field] = value
    except (ValueError, TypeError, KeyError):
        return  # an earlier attack left no call there
    lines[at] = json.dumps(call).encode()
    path.write_bytes(b"\n".join(lines))


def _not_a_folder(recordings: Path, outside: Path, name: str, data: bytes) -> None:
    if not os.path.lexists(recordings / name):
        (recordings / name).write_bytes(data)  # a file where a stage's folder would be


ATTACK: dict[str, Callable[..., None]] = {
    "edit": _edit,
    "stage named oddly": _odd_stage,
    "look-alike file": _lookalike,
    "link out": _links,
    "long line": _long_line,
    "not a folder": _not_a_folder,
    "context": _context,
}


stages = st.sampled_from(STAGES)
recordings_bytes = inputs(*SEEDS)
LINKS = ["stage", "calls", "blobs", "new stage", "recordings", "dangling", "loop"]
# What each attack needs, drawn.
ARGUMENTS: dict[str, st.SearchStrategy[tuple[Any, ...]]] = {
    "edit": st.tuples(stages, recordings_bytes),
    "stage named oddly": st.tuples(names, st.one_of(st.sampled_from(SEEDS), recordings_bytes)),
    "look-alike file": st.tuples(stages, st.sampled_from(LOOKALIKE_FILES), recordings_bytes),
    "link out": st.tuples(stages, st.sampled_from(LINKS)),
    "long line": st.tuples(
        stages, st.sampled_from([2**16, 2**20]), st.integers(0, 3), mixed_texts.map(encoded)
    ),
    "not a folder": st.tuples(names, st.binary(max_size=64)),
    "context": st.tuples(
        stages,
        st.integers(0, 100),
        st.sampled_from(["whole", "stage", "item", "step", "attempt", "labels"]),
        st.recursive(
            st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text()),
            lambda inner: st.one_of(
                st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
            ),
            max_leaves=10,
        ),
    ),
}
attacks = st.lists(
    st.sampled_from(sorted(ATTACK)).flatmap(lambda kind: st.tuples(st.just(kind), ARGUMENTS[kind])),
    min_size=1,
    max_size=3,
)


def attack(recordings: Path, outside: Path, chosen: list[tuple[str, Any]]) -> None:
    for kind, what in chosen:
        event(kind)
        if _plain(recordings):  # not once an earlier attack linked the whole folder out
            ATTACK[kind](recordings, outside, *what)


def _reset(b: Path) -> None:
    recordings = b / "recordings"
    if recordings.is_symlink():
        recordings.unlink()
    elif recordings.exists():
        shutil.rmtree(recordings)
    shutil.copytree(ROOT / "recordings", recordings)


def _diff(a: Path, b: Path) -> None:
    """The command as a user runs it: a clear error (exit 1, `Error:` and the message), or the diff."""
    result = CliRunner().invoke(main, ["diff", str(a), str(b), "--json"], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    if result.exit_code == 1:
        assert "Error: " in result.output and "Fix" in result.output, result.output


def _every_call(b: Path) -> None:
    """Run B read, and every call of its recordings looked up (so verified), not only the changed."""
    run = read_run(str(b), Path.cwd())
    for key in run.calls:
        assert run.calls[key].record.key == key


@fuzz
@given(chosen=attacks)
def test_a_hostile_run_s_recordings_folder(
    runs: tuple[Path, Path, Path], chosen: list[tuple[str, Any]]
) -> None:
    a, b, outside = runs
    _reset(b)
    attack(b / "recordings", outside, chosen)
    for read in (lambda: _diff(a, b), lambda: _every_call(b)):
        opened = opening(read)
        out = [p for p in opened if Path(p).is_relative_to(outside.resolve())]
        assert not out, f"the diff opened files outside the run's folder: {out}"


def test_a_line_past_the_bound_is_refused_naming_its_file_and_line(runs: tuple[Path, Path, Path]) -> None:
    """A recording line longer than any call (pipeline.llm.bounds.MAX_LINE_BYTES): refused before
    it is parsed, with the file, the line and the fix."""
    a, b, _ = runs
    _reset(b)
    path = b / "recordings" / "judge" / CALLS_FILE
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join([lines[0], b'{"key": "' + b"x" * MAX_LINE_BYTES + b'"}', *lines[1:]]))
    result = CliRunner().invoke(main, ["diff", str(a), str(b), "--json"], catch_exceptions=False)
    assert result.exit_code == 1
    assert f"{path}:2: longer than" in result.output and "Fix: restore the file" in result.output


def test_the_untouched_copy_diffs_clean(runs: tuple[Path, Path, Path]) -> None:
    """The seed: run B unattacked is run A (else the fuzzing would stop at its first check)."""
    a, b, _ = runs
    _reset(b)
    result = CliRunner().invoke(main, ["diff", str(a), str(b), "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    _every_call(b)


def test_a_call_whose_context_is_not_one_is_refused_naming_its_line(runs: tuple[Path, Path, Path]) -> None:
    """Found by the fuzzing: a design that selects its calls by where they were made (SummEval) read
    each context unchecked, and one that was not a context stopped the diff with a traceback."""
    a, b, outside = runs
    _reset(b)
    _context(b / "recordings", outside, "summeval_judge", 0, "labels", "x")
    args = ["diff", str(a), str(b), "--design", "summeval"]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 1
    path = b / "recordings" / "summeval_judge" / CALLS_FILE
    assert f"{path}:1: not a recorded call (its context: labels: Input should be a valid dictionary)" in (
        result.output
    )
    assert "Fix: restore it from git" in result.output
