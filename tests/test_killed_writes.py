"""A write killed outright (SIGKILL) leaves its temporary file beside its target; the next write into
that folder removes it, and only it: never a live write's (held locked), never what merely looks like
one (pipeline.llm.files.sweep_killed_writers). Each writer here is a real process, really killed."""

from __future__ import annotations

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

from pipeline.llm import files
from pipeline.llm.files import atomic_write

ROOT = Path(__file__).resolve().parent.parent
LOOKS_LIKE = ".b.csv.abcd1234.locked.tmp"  # a name such as a write's temporary file has


def _writer(target: Path, then: str) -> subprocess.Popen[str]:
    """A process that starts replacing `target` (its first line written), says so, then does `then`
    ("sleep": waits to be killed; "finish": finishes when told on its stdin)."""
    code = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from pipeline.llm.files import atomic_write_chunks
        def chunks():
            yield "first line\\n"
            print("writing", flush=True)
            time.sleep(600) if {then == "sleep"} else sys.stdin.readline()
            yield "second line\\n"
        atomic_write_chunks(Path({str(target)!r}), chunks())
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writer = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    assert writer.stdout is not None and writer.stdout.readline() == "writing\n"
    return writer


def _killed_mid_write(target: Path) -> str:
    """The temporary file a writer of `target`, killed (SIGKILL) while it wrote, left."""
    writer = _writer(target, "sleep")
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    [left] = [p.name for p in target.parent.iterdir() if p.name.endswith(".tmp")]
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
    left = _killed_mid_write(out / "b.csv")
    assert (out / left).is_file()
    _run(out)  # the next run
    assert sorted(os.listdir(out)) == ["a.csv", "b.csv"]
    assert _everything(out) == _everything(clean)


def test_a_live_write_s_temporary_is_never_removed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    killed = _killed_mid_write(out / "c.csv")
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
    assert (out / "b.csv").read_text() == "first line\nsecond line\n"
    assert sorted(os.listdir(out)) == ["a.csv", "b.csv"]


def test_what_only_looks_like_a_killed_write_s_temporary_is_left_be(tmp_path: Path) -> None:
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    (out / "sub").mkdir(parents=True)
    elsewhere.mkdir()
    killed = _killed_mid_write(out / "b.csv")
    users = elsewhere / "users-file"
    users.write_text("keep")
    lookalikes: dict[str, Callable[[Path], object]] = {
        ".l.csv.abcd1234.locked.tmp": lambda p: p.symlink_to(users),
        ".d.csv.abcd1234.locked.tmp": lambda p: p.mkdir(),
        ".f.csv.abcd1234.locked.tmp": lambda p: os.mkfifo(p),
        ".h.csv.abcd1234.locked.tmp": lambda p: os.link(users, p),  # a file with another name
        ".b.csv.abcd1234.tmp": lambda p: p.write_text("another tool's temporary file"),
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
            swept.append(files._removed_if_killed(folder, os.path.basename(name)))
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
    left = _killed_mid_write(out / name)
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
