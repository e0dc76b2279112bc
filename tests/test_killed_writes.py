"""A write killed outright (SIGKILL) leaves its temporary file beside its target; the next write into
that folder removes it, and only it: never a live write's (held locked), never what merely looks like
one (pipeline.llm.killed_writes). Each writer here is a real process, really killed: a file's
replacement, a results file's ordered write (pipeline.data.jsonl) and a recording's shard."""

from __future__ import annotations

import fcntl
import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pipeline.llm import killed_writes
from pipeline.llm.files import atomic_write

ROOT = Path(__file__).resolve().parent.parent
LOOKS_LIKE = ".b.csv.abcd1234.locked.tmp"  # a name such as a write's temporary file has


WRITES = {  # how each writer writes `target` from the lines `chunks()` yields
    "replace": "from pipeline.llm.files import atomic_write_chunks as write\nwrite(target, chunks())",
    "results": textwrap.dedent("""
        from pipeline.data.jsonl import Result, write_jsonl
        class Row(Result):
            item: str
        write_jsonl(target, (Row(item=line) for line in chunks()))
    """),
    "shard": textwrap.dedent("""
        from pipeline.llm.recordings.shards import write_shard
        write_shard(target.parent, "calls", "0", (line.encode() for line in chunks()))
    """),
}


def _writer(target: Path, then: str, how: str = "replace") -> subprocess.Popen[str]:
    """A process that starts writing `target` (its first line written), says so, then does `then`
    ("sleep": waits to be killed; "finish": finishes when told on its stdin). `how`: WRITES' key."""
    code = (
        textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        target = Path({str(target)!r})
        def chunks():
            yield "b"
            print("writing", flush=True)
            time.sleep(600) if {then == "sleep"} else sys.stdin.readline()
            yield "a"
    """)
        + WRITES[how]
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writer = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    assert writer.stdout is not None and writer.stdout.readline() == "writing\n"
    return writer


def _killed_mid_write(target: Path, how: str = "replace") -> list[str]:
    """The temporary files a writer of `target`, killed (SIGKILL) while it wrote, left."""
    writer = _writer(target, "sleep", how)
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    left = sorted(p.name for p in target.parent.iterdir() if p.name.endswith(".tmp"))
    assert left, "the killed writer left nothing to sweep"
    return left


def _everything(folder: Path) -> str:
    """A hash of every name in `folder` and every file's bytes: nothing left out (not even `*.tmp`)."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        digest.update(f"{path.relative_to(folder)}\0".encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _run(folder: Path) -> None:
    """What a stage writes into its out folder."""
    atomic_write(folder / "a.csv", "a\n1\n")
    atomic_write(folder / "b.csv", "b\n2\n")


def test_a_killed_write_s_temporary_is_removed_by_the_next_run(tmp_path: Path) -> None:
    clean, out = tmp_path / "clean", tmp_path / "out"
    _run(clean)
    out.mkdir()
    [left] = _killed_mid_write(out / "b.csv")
    assert (out / left).is_file()
    _run(out)  # the next run
    assert sorted(os.listdir(out)) == ["a.csv", "b.csv"]
    assert _everything(out) == _everything(clean)


def test_a_live_write_s_temporary_is_never_removed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    [killed] = _killed_mid_write(out / "c.csv")
    live = _writer(out / "b.csv", "finish")
    try:
        [held] = [n for n in os.listdir(out) if n.endswith(".tmp") and n != killed]
        atomic_write(out / "a.csv", "a\n")  # a write beside the live one sweeps the folder
        assert sorted(os.listdir(out)) == sorted([held, "a.csv"])
        assert live.stdin is not None
        live.stdin.write("\n")
        live.stdin.close()
        assert live.wait(timeout=60) == 0
    finally:
        live.kill()
    assert (out / "b.csv").read_text() == "ba"
    assert sorted(os.listdir(out)) == ["a.csv", "b.csv"]


def test_what_only_looks_like_a_killed_write_s_temporary_is_left_be(tmp_path: Path) -> None:
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    (out / "sub").mkdir(parents=True)
    elsewhere.mkdir()
    [killed] = _killed_mid_write(out / "b.csv")
    users = elsewhere / "users-file"
    users.write_text("keep")
    lookalikes: dict[str, Callable[[Path], object]] = {
        ".l.csv.abcd1234.locked.tmp": lambda p: p.symlink_to(users),
        ".d.csv.abcd1234.locked.tmp": lambda p: p.mkdir(),
        ".f.csv.abcd1234.locked.tmp": lambda p: os.mkfifo(p),
        ".h.csv.abcd1234.locked.tmp": lambda p: os.link(users, p),  # a file with another name
        ".b.csv.abcd1234.part": lambda p: p.write_text("another tool's temporary file"),
        ".l.csv.abcd1234.tmp": lambda p: p.symlink_to(users),  # as an older judgeloop named them
        ".d.csv.abcd1234.ordered.tmp": lambda p: p.mkdir(),
        ".report.replaced.tmp": lambda p: p.mkdir(),  # the pages' aside (pipeline.reports.pages)
        ".b.csv.abcd12345.locked.tmp": lambda p: p.write_text("not a name mkstemp makes"),
        "b.csv.abcd1234.locked.tmp": lambda p: p.write_text("not hidden"),
        f"sub/{LOOKS_LIKE}": lambda p: p.write_text("in another folder"),
    }
    for name, make in lookalikes.items():
        make(out / name)
    atomic_write(out / "a.csv", "a\n")
    assert not (out / killed).exists()
    for name in lookalikes:
        assert os.path.lexists(out / name), name
    assert users.read_text() == "keep"
    assert os.readlink(out / ".l.csv.abcd1234.locked.tmp") == str(users)


def test_a_sweep_between_a_temporary_file_s_creation_and_its_lock_costs_the_write_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process's sweep that takes the new file before its writer locks it (so, to the sweep,
    a killed writer's) removes it: the writer sees its name gone and makes another."""
    made = tempfile.mkstemp
    swept: list[bool] = []

    def made_then_swept(*args: Any, **kwargs: Any) -> tuple[int, str]:
        fd, name = made(*args, **kwargs)
        if not swept:  # the first one only; a sweep holds its own open file, as another process's does
            folder = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
            swept.append(killed_writes.removed_if_killed(folder, os.path.basename(name)))
            os.close(folder)
        return fd, name

    monkeypatch.setattr(tempfile, "mkstemp", made_then_swept)  # as pipeline.llm.files calls it
    atomic_write(tmp_path / "a.csv", "a\n")
    assert swept == [True]
    assert os.listdir(tmp_path) == ["a.csv"]
    assert (tmp_path / "a.csv").read_text() == "a\n"


@pytest.mark.parametrize("name", ["x" * 235, "y" * 255, "é" * 127], ids=["235", "255", "254-bytes-of-utf8"])
def test_a_target_named_up_to_the_limit_is_written_and_its_killed_temporary_swept(
    tmp_path: Path, name: str
) -> None:
    """A name a plain write can make (up to NAME_MAX, 255 bytes) is written too: the temporary file's
    name (21 bytes longer) is cut short to fit, not refused with a raw ENAMETOOLONG about it, and one
    that a killed writer left under the cut name is still swept."""
    out = tmp_path / "out"
    out.mkdir()
    [left] = _killed_mid_write(out / name)
    assert len(os.fsencode(left)) <= 255
    atomic_write(out / name, "whole\n")
    assert os.listdir(out) == [name]
    assert (out / name).read_text() == "whole\n"


def test_a_folder_that_cannot_be_listed_costs_the_write_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep is housekeeping: a folder whose listing fails (an I/O error of a network file system)
    is left unswept and the write goes on, not failed by an error about a listing it never asked for."""

    def unlisted(folder: object) -> list[str]:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "listdir", unlisted)  # as pipeline.llm.files calls it
    atomic_write(tmp_path / "a.csv", "a\n")
    assert (tmp_path / "a.csv").read_text() == "a\n"


@pytest.mark.parametrize("how", ["results", "shard"])
def test_a_killed_results_or_shard_write_leaves_nothing_past_the_next_write(tmp_path: Path, how: str) -> None:
    """A results file's ordered write and a recording's shard write through locked temporary files
    too: what a killed one left is swept by the next write into the folder (an unlocked
    `.r.jsonl.XXXXXXXX.ordered.tmp` or `.calls-0.XXXXXXXX.tmp` stayed for good)."""
    out = tmp_path / "out"
    out.mkdir()
    _killed_mid_write(out / "r.jsonl", how)
    atomic_write(out / "a.csv", "a\n")  # the next write into the folder
    assert os.listdir(out) == ["a.csv"]


@pytest.mark.parametrize("how", ["results", "shard"])
def test_a_live_results_or_shard_write_s_temporary_is_never_removed(tmp_path: Path, how: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    live = _writer(out / "r.jsonl", "finish", how)
    try:
        held = [n for n in os.listdir(out) if n.endswith(".tmp")]
        atomic_write(out / "a.csv", "a\n")  # a write beside the live one sweeps the folder
        assert sorted(os.listdir(out)) == sorted([*held, "a.csv"])
        assert live.stdin is not None
        live.stdin.write("\n")
        live.stdin.close()
        assert live.wait(timeout=60) == 0
    finally:
        live.kill()
    written = sorted(n for n in os.listdir(out) if n != "a.csv" and not n.endswith(".tmp"))
    if how == "results":  # "b" came before "a": merged back in order from the temporary file
        assert written == ["r.jsonl"]
        assert (out / "r.jsonl").read_text() == '{"item":"a"}\n{"item":"b"}\n'
    else:
        [shard] = written
        assert (out / shard).read_text() == "ba"


def test_an_older_judgeloop_s_temporaries_are_swept_unless_held(tmp_path: Path) -> None:
    """An older judgeloop's unlocked temporary files (a replacement's, a shard's, a results file's
    ordered staging) are a killed writer's to the sweep, under the same rules: one held locked
    (a live writer's) stays."""
    out = tmp_path / "out"
    out.mkdir()
    older = [".b.csv.abcd1234.tmp", ".r.jsonl.q0w9e8r7.ordered.tmp"]  # (a shard's: the recording's writer)
    for name in [*older, ".h.csv.abcd1234.tmp"]:
        (out / name).write_text("half")
        (out / name).chmod(0o600)  # mkstemp's (an older judgeloop chmod-ed it just before the rename)
    for target in ["b.csv", "r.jsonl", "h.csv"]:
        (out / target).write_text("old")  # the file the killed write was replacing, standing
    with open(out / ".h.csv.abcd1234.tmp", "rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        atomic_write(out / "a.csv", "a\n")
    assert sorted(os.listdir(out)) == [".h.csv.abcd1234.tmp", "a.csv", "b.csv", "h.csv", "r.jsonl"]


def test_a_user_s_own_file_named_as_an_older_temporary_is_never_swept(tmp_path: Path) -> None:
    """review16: an older judgeloop's unlocked name, `.<target>.<8 characters>.tmp`, is also a name a
    person or another tool gives a hidden file (`.notes.20261128.tmp`, `.iso.download.tmp`), and no
    lock tells it from a killed write's. The sweep takes one only as an older judgeloop's killed write
    left it: mkstemp's 0600, this user's, beside the file it was replacing."""
    out = tmp_path / "out"
    out.mkdir()
    users = {
        ".notes.20261128.tmp": 0o644,  # a plain file's mode, its `notes` beside it
        ".iso.download.tmp": 0o600,  # no `iso` beside it
        ".r.jsonl.overview.ordered.tmp": 0o664,
    }
    for name, mode in users.items():
        (out / name).write_text("mine")
        (out / name).chmod(mode)
    (out / "notes").write_text("n")
    (out / "r.jsonl").write_text("r")
    atomic_write(out / "a.csv", "a\n")
    assert sorted(os.listdir(out)) == sorted([*users, "notes", "r.jsonl", "a.csv"])


def test_a_recording_s_writer_clears_only_killed_temporary_files_and_fails_on_no_look_alike(
    tmp_path: Path,
) -> None:
    """Under the recording folder's lock a temporary file at a shard's or calls.jsonl's temporary
    name is a killed writer's and goes; a folder or a file of another name there is left, and the
    write goes on (a folder at such a name failed it with a raw IsADirectoryError; a link there is
    refused before, as any link in a recording's folder)."""
    from pipeline.llm.recordings import stage_writer
    from tests.test_trust_recordings import make_calls

    directory, elsewhere = tmp_path / "judge", tmp_path / "users-file"
    directory.mkdir()
    elsewhere.write_text("keep")
    killed = [".calls-0.abcd1234.tmp", ".blocks-3.q9w8e7r6.locked.tmp", ".calls.jsonl.zz.tmp"]
    for name in killed:
        (directory / name).write_text("half")
    (directory / ".calls-1.abcd1234.tmp").mkdir()
    os.link(elsewhere, directory / ".calls-4.abcd1234.tmp")
    stage_writer.write_stage(directory, make_calls(1, n=3))
    left = sorted(os.listdir(directory))
    assert left == [".calls-1.abcd1234.tmp", ".calls-4.abcd1234.tmp", "calls.jsonl"]
    assert elsewhere.read_text() == "keep"
