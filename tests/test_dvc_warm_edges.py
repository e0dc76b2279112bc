"""The warm stage process of a plain `dvc repro` (stages/dvc_warm.py, stages/dvc_zygote.py) at its
edges, under a real DVC (tests/test_dvc_warm.py's project): a `.pyc` replaced under an unchanged
module, a module added since the warm process listed its folder, fds past 0-2 given to a stage,
Ctrl-Z, and a background job of a terminal."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import marshal
import os
import pty
import py_compile
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import CodeType

import pytest
import yaml

from stages import dvc_warm
from tests.test_dvc_warm import (
    ENDED_WITHIN,
    SHELLS,
    _children,
    _dvc_yaml,
    _env,
    _no_warm_process_left,
    _repro,
)
from tests.test_dvc_warm import _sigint_as_from_a_terminal as _sigint_as_from_a_terminal  # (autouse)
from tests.test_dvc_warm import project as project  # the fixture: a temporary git repo, DVC, its stages

pytestmark = pytest.mark.slow

# A byte-code cache of another runner (VERSION 3) put under the unchanged stages/runner.py, as
# `compileall --invalidation-mode unchecked-hash` or a copied __pycache__ leaves one: Python's loader
# takes an unchecked hash-based .pyc without reading the source.
PYC = (
    "import pathlib, py_compile, importlib.util as u; p = pathlib.Path('out/v3.py'); "
    "p.write_text(pathlib.Path('stages/runner.py').read_text().replace('VERSION = 1', 'VERSION = 3')); "
    "py_compile.compile(str(p), cfile=u.cache_from_source('stages/runner.py'), dfile='stages/runner.py', "
    "invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH, doraise=True)"
)
# A module added to stages/ with the folder's mtime put back: as one added within the same tick of
# the file system's clock as the folder's last listing looks to a finder that listed it then.
ADD = (
    "import os; seen = os.stat('stages'); open('stages/extra.py', 'w').write('WORD = 1'); "
    "os.utime('stages', ns=(seen.st_atime_ns, seen.st_mtime_ns))"
)


def test_a_pyc_replaced_under_an_unchanged_module_runs_the_later_stages_cold(project: Path) -> None:
    """A cold stage runs what Python's loader takes now (here an unchecked hash-based .pyc of other
    code under the unchanged stages/runner.py, which DVC does not hash); a fork would run what its
    warm process loaded: refused, so the stage runs what a cold one runs."""
    (project / "dvc.yaml").write_text(
        yaml.safe_dump(_dvc_yaml(between=f'python -c "{PYC}" && touch out/between'))
    )
    _, log = _repro(project)
    cached = importlib.util.cache_from_source(str(project / "stages" / "runner.py"))
    assert "warm demo two" in log
    assert f"cold refused {cached} replaced: demo three" in log
    three = (project / "out" / "three.txt").read_text()
    assert "demo two version 1 " in three
    assert "demo three version 3 " in three


def test_a_faithful_pyc_written_between_stages_is_no_refusal(tmp_path: Path) -> None:
    """A .pyc of the unchanged source written (again) by any import or compileall, as every cold stage
    may, holds the code the warm process loaded: no refusal; one of other code is refused once
    Python's loader would take it, and one it would not take (bad magic, a checked hash of other
    source) is none either."""
    from stages import bytecode, dvc_zygote

    source = tmp_path / "faithful_module.py"
    source.write_text("VERSION = 1\n\ndef f(x):\n    return [i * x for i in range(3)]\n")
    other = tmp_path / "other.py"
    other.write_text(source.read_text().replace("VERSION = 1", "VERSION = 3"))
    cached = importlib.util.cache_from_source(str(source))
    py_compile.compile(str(source), cfile=cached, doraise=True)
    time.sleep(0.1)  # past the file system's clock tick: the .pyc is older than the warm process
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.import_module("faithful_module")  # as the warm process imported it

        began = time.time_ns()
        files = [f for f in bytecode.noted(lambda ctime: dvc_zygote.after(ctime, began)) if f[2] == cached]
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("faithful_module", None)
    assert files and files[0][4]  # its bytes read: the code the warm process loaded
    seen: dict[tuple[str, bytecode.Identity | None], str] = {}
    unchecked = py_compile.PycInvalidationMode.UNCHECKED_HASH
    checked = py_compile.PycInvalidationMode.CHECKED_HASH
    steps: list[tuple[Callable[[], object], str]] = [
        (lambda: py_compile.compile(str(source), cfile=cached, doraise=True), ""),
        (lambda: py_compile.compile(str(source), cfile=cached, invalidation_mode=checked), ""),
        (lambda: Path(cached).unlink(), ""),  # the loader compiles the source
        (lambda: Path(cached).write_bytes(b"not byte-code"), ""),  # bad magic: the source compiled
        (
            lambda: py_compile.compile(
                str(other), cfile=cached, dfile=str(source), invalidation_mode=checked
            ),
            "",
        ),
        (
            lambda: py_compile.compile(
                str(other), cfile=cached, dfile=str(source), invalidation_mode=unchecked
            ),
            "replaced",
        ),
    ]
    for how, expected in steps:
        how()
        verdict = bytecode.replaced(files, seen)
        assert verdict == (f"{cached} {expected}" if expected else ""), (verdict, expected)
    # The same code but a function's qualified name, which code objects' == leaves out.
    code = compile(source.read_bytes(), str(source), "exec", dont_inherit=True)
    renamed = [c.replace(co_qualname="g") if isinstance(c, CodeType) else c for c in code.co_consts]
    assert code.replace(co_consts=tuple(renamed)) == code
    header = importlib.util.MAGIC_NUMBER + (1).to_bytes(4, "little") + bytes(8)  # unchecked hash
    Path(cached).write_bytes(header + marshal.dumps(code.replace(co_consts=tuple(renamed))))
    assert bytecode.replaced(files, seen) == f"{cached} replaced"


def test_a_module_added_since_the_warm_process_listed_its_folder_is_found(project: Path) -> None:
    """A fork inherits its warm process's import finders, which trust a folder's listing while its
    mtime is unchanged; a cold stage lists it afresh and finds a module added since (here with the
    folder's mtime put back, as within one clock tick)."""
    (project / "stages" / "__pycache__").mkdir()  # (made by stage one otherwise: the folder's mtime moves)
    (project / "dvc.yaml").write_text(
        yaml.safe_dump(_dvc_yaml(between=f'python -c "{ADD}" && touch out/between'))
    )
    _, log = _repro(project)
    assert "warm demo two" in log and "warm demo three" in log
    assert not (project / "out" / "two.extra").exists()
    assert (project / "out" / "three.extra").read_text() == "1"


@SHELLS
def test_a_stage_given_other_fds_runs_cold(project: Path, shell: str | None) -> None:
    """`3>FILE` in a stage's command: a cold stage has that fd, a fork would have 0-2 alone (and the
    warm process, had this stage started it, would hold the file): cold."""
    (project / "dvc.yaml").write_text(
        yaml.safe_dump(_dvc_yaml(three="python -m stages demo three 3>out/three.fd"))
    )
    _, log = _repro(project, shell)
    assert "warm demo two" in log
    assert "cold fds 3 open: demo three" in log
    three = (project / "out" / "three.txt").read_text().splitlines()[-1]
    assert three.endswith("fds ['0', '1', '2', '3', '4', '5']")  # 3, and its output's and listing's


def test_ctrl_z_stops_a_warm_stage_and_fg_continues_it(project: Path) -> None:
    """Ctrl-Z reaches the terminal's foreground process group (DVC, its shell, the stage's process),
    which stops; the warm fork, in another session, is stopped with it and continued with it. DVC runs
    here in a process group of its own under a parent of the same session, as a job-control shell's
    job is (a group whose parent is outside its session is orphaned, and the kernel drops its
    SIGTSTP: nothing stops there, warm or cold)."""
    shell, log = _sleeping_job(project)
    try:
        fork = _asleep(project, shell)
        dvc = _children(shell.pid)[0]
        os.killpg(dvc, signal.SIGTSTP)  # what Ctrl-Z does
        assert _state_becomes(fork, b"T"), "the warm fork was not stopped"
        os.killpg(dvc, signal.SIGCONT)  # what `fg` does
        assert _state_becomes(fork, b"S"), "the warm fork was not continued"
        os.killpg(dvc, signal.SIGINT)
        assert shell.wait(timeout=60) != 0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, IndexError, OSError):
            os.killpg(_children(shell.pid)[0], signal.SIGKILL)
        shell.wait()
    assert "warm demo sleep" in log.read_text().splitlines()
    _no_warm_process_left(log)


def _sleeping_job(project: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """`dvc repro` as a job-control shell's job (DVC in a process group of its own, in the shell's
    session), its stage three sleeping until interrupted; and the warm log's path."""
    stages = _dvc_yaml()
    stages["stages"]["three"]["cmd"] = "python -m stages demo sleep"  # type: ignore[index]
    (project / "dvc.yaml").write_text(yaml.safe_dump(stages))
    log = project.parent / "warm.log"
    env = _env(project.parent, None, **{dvc_warm.LOG: str(log)})
    job = (  # Ctrl-Z's default action, whatever this suite was started under (as SIGINT's: above)
        "import signal, subprocess, sys; signal.signal(signal.SIGTSTP, signal.SIG_DFL); "
        "sys.exit(subprocess.Popen(sys.argv[1:], process_group=0).wait())"
    )
    shell = subprocess.Popen(
        [sys.executable, "-c", job, sys.executable, "-m", "dvc", "repro"],
        cwd=project,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # the "shell", leading a session; DVC's group is a job of it
    )
    return shell, log


def _asleep(project: Path, shell: subprocess.Popen[bytes]) -> int:
    """The sleeping stage's pid (the warm fork's, run warm), once it sleeps."""
    sleeping = project / "out" / "sleeping"
    deadline = time.monotonic() + 120
    while not sleeping.exists() and time.monotonic() < deadline and shell.poll() is None:
        time.sleep(0.05)
    return int(sleeping.read_text())


def _state_becomes(pid: int, state: bytes) -> bool:
    """Whether `pid`'s state becomes `state` (T: stopped; S: sleeping) within a bound for a loaded
    machine (not a timing)."""
    deadline = time.monotonic() + ENDED_WITHIN
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0] == state:
                return True
        time.sleep(0.02)
    return False


# A job-control shell on a terminal (the test's pty): its session's leader, the terminal's controlling
# process; it runs DVC as a job in a process group of its own, in the foreground (the terminal's
# foreground group, set before DVC starts) or in the background (`dvc repro &`).
JOB_ON_A_TERMINAL = """
import fcntl, os, subprocess, sys, termios
fcntl.ioctl(0, termios.TIOCSCTTY, 0)
foreground = sys.argv[1] == "fg"
go, wait = os.pipe()
hold = "import os, sys; os.read(3, 1); os.close(3); os.execv(sys.argv[1], sys.argv[1:])"
job = subprocess.Popen([sys.executable, "-c", hold, *sys.argv[2:]], process_group=0, pass_fds=(go,))
if foreground:
    os.tcsetpgrp(0, job.pid)
os.write(wait, b"x")
sys.exit(job.wait())
"""


@pytest.mark.parametrize("job", ["fg", "bg"])
def test_a_background_job_of_a_terminal_runs_cold(project: Path, job: str) -> None:
    """`dvc repro &` on a terminal: a cold stage that reads it, or writes it under `stty tostop`, is
    stopped until `fg`; a fork, whose session that terminal does not control, never is: cold. In the
    foreground, later stages run warm."""
    log = project.parent / "warm.log"
    env = _env(project.parent, None, **{dvc_warm.LOG: str(log)})
    try:
        leader, terminal = pty.openpty()
    except OSError:  # (no pseudo-terminals here: no terminal either, and no job control on one)
        pytest.skip("no pseudo-terminal")
    output = bytearray()
    drain = threading.Thread(target=_drained, args=(leader, output), daemon=True)
    drain.start()
    with os.fdopen(terminal, "r+b", buffering=0) as tty:
        shell = subprocess.Popen(
            [sys.executable, "-c", JOB_ON_A_TERMINAL, job, sys.executable, "-m", "dvc", "repro"],
            cwd=project,
            env=env,
            stdin=tty,
            stdout=tty,
            stderr=tty,
            start_new_session=True,
        )
    try:
        assert shell.wait(timeout=300) == 0, output.decode(errors="replace")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGKILL)
        shell.wait()
    drain.join(timeout=30)
    lines = [line for line in log.read_text().splitlines() if not line.startswith("warm process ")]
    if job == "fg":
        assert lines == ["cold starting the warm process: demo one", "warm demo two", "warm demo three"]
    else:
        assert lines == [f"cold a background job of its terminal: demo {s}" for s in ("one", "two", "three")]
    assert "three on stdout" in output.decode(errors="replace")
    _no_warm_process_left(log)


def _drained(leader: int, into: bytearray) -> None:
    """The terminal's output read as it comes (a full terminal would block its writers), to its end."""
    with contextlib.suppress(OSError):  # EIO: every process holding the terminal has ended
        while chunk := os.read(leader, 65536):
            into.extend(chunk)
    os.close(leader)
