"""The warm stage process of a plain `dvc repro` (stages/dvc_warm.py, stages/dvc_zygote.py), under a
real DVC in a temporary git repository: a `stages` package of its own (the real client, warm process
and zygote, a runner that writes what it saw), so that every stage is quick; the paper's pipeline
warm and cold is tests/test_dvc_warm_pipeline.py."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from stages import dvc_warm
from tests.conftest import ROOT

pytestmark = pytest.mark.slow
# How long the warm process may take to see DVC gone and end: a bound for a loaded machine (a CI
# runner shares its cores), not a timing; on a quiet one it ends within milliseconds.
ENDED_WITHIN = 30

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


@pytest.fixture
def tmp_path(short_tmp_path: Path) -> Path:
    """A folder whose sockets' paths stay within AF_UNIX's 107 bytes whatever TMPDIR and the test's
    name (tests/conftest.py): the warm process's folder is in it."""
    return short_tmp_path


# The runner writes its stage's output from its input and its module's VERSION, and the signal
# disposition and fds it started with; stage `sleep` waits to be interrupted.
RUNNER = """
import os, signal, sys, time
VERSION = 1

def preload():
    pass

def main():
    design, stage = sys.argv[1:3]
    previous = {"two": "one", "three": "two"}.get(stage)
    before = open(f"out/{previous}.txt").read() if previous else ""
    if stage == "sleep":
        open("out/sleeping", "w").write(str(os.getpid()))
        time.sleep(60)
    mask = os.umask(0)
    os.umask(mask)
    try:  # a module a stage between may add (not an output of DVC's)
        from stages import extra
        open(f"out/{stage}.extra", "w").write(str(extra.WORD))
    except ImportError:
        pass
    with open(f"out/{stage}.state", "w") as state:  # (not an output of DVC's)
        state.write(f"optimize {sys.flags.optimize} umask {mask:o}")
    with open(f"out/{stage}.txt", "w") as out:
        fds = sorted(os.listdir("/proc/self/fd"))  # the warm process's own closed in its fork
        out.write(f"{before}{design} {stage} version {VERSION} sigint {signal.getsignal(2)!r} fds {fds}\\n")
    print(f"{stage} on stdout")
"""
EDIT = (
    "import pathlib; p = pathlib.Path('stages/runner.py'); "
    "p.write_text(p.read_text().replace('VERSION = 1', 'VERSION = 2'))"
)


def _stage(cmd: str, deps: list[str], outs: list[str]) -> dict[str, object]:
    return {"cmd": cmd, "deps": deps, "outs": [{out: {"cache": False}} for out in outs]}


def _dvc_yaml(between: str = "", three: str = "python -m stages demo three") -> dict[str, object]:
    stages = {
        "one": _stage("python -m stages demo one", ["stages"], ["out/one.txt"]),
        "two": _stage("python -m stages demo two", ["out/one.txt"], ["out/two.txt"]),
        "three": _stage(three, ["out/two.txt"], ["out/three.txt"]),
    }
    if between:  # a command between two and three
        stages["between"] = _stage(between, ["out/two.txt"], ["out/between"])
        stages["three"]["deps"] = ["out/two.txt", "out/between"]
    return {"stages": stages}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "stages").mkdir(parents=True)
    for name in (
        "__init__.py",
        "__main__.py",
        "bytecode.py",
        "shadowing.py",
        "dvc_warm.py",
        "dvc_zygote.py",
        "zygote.py",
    ):
        shutil.copy(ROOT / "stages" / name, root / "stages" / name)
    (root / "stages" / "runner.py").write_text(RUNNER)
    (root / "pipeline").mkdir()
    (root / "pipeline" / "__init__.py").write_text("")
    shutil.copy(ROOT / "pipeline" / "fast_exit.py", root / "pipeline" / "fast_exit.py")
    (root / "out").mkdir()
    (root / ".gitignore").write_text("out/\n")
    (root / "dvc.yaml").write_text(yaml.safe_dump(_dvc_yaml()))
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=root, check=True, env=_env(tmp_path))
    # The project's own: byte-code ignored, which the warm process writes as it imports, racing DVC's
    # hash of stage one's dep `stages` (else dvc.lock differed from the cold run's, now and then).
    shutil.copy(ROOT / ".dvcignore", root / ".dvcignore")
    return root


@pytest.fixture(autouse=True)
def _sigint_as_from_a_terminal() -> Iterator[None]:
    """DVC and its stages get SIGINT's default disposition, as from a terminal, whatever this suite
    was started under: a shell that starts a command in the background (`cmd &`, as a CI runner may)
    leaves SIGINT ignored, every child inherits that, and Ctrl-C could then stop nothing. A handler
    of this process's own is reset to the default at each child's exec."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def _env(tmp_path: Path, shell: str | None = "", **extra: str) -> dict[str, str]:
    """This suite's environment for DVC; `shell`: the SHELL that DVC runs each stage's command with
    ("" as this suite has it; None unset, as on a CI runner, so that DVC takes /bin/sh)."""
    drop = (dvc_warm.SWITCH, dvc_warm.LOG, "PYTHONPATH", *(() if shell == "" else ("SHELL",)))
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(GIT_IDENTITY, **extra)
    if shell:
        env["SHELL"] = shell
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["XDG_RUNTIME_DIR"] = str(tmp_path / "run")  # the sockets' folder: this test's own
    (tmp_path / "run").mkdir(mode=0o700, exist_ok=True)
    return env


def _repro(
    project: Path, shell: str | None = "", **extra: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """`dvc repro` (the CLI, as a user runs it), and what the warm log says."""
    log = project.parent / "warm.log"
    log.unlink(missing_ok=True)
    env = _env(project.parent, shell, **{dvc_warm.LOG: str(log), **extra})
    result = subprocess.run(
        [sys.executable, "-m", "dvc", "repro", "--force"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    _no_warm_process_left(log)
    return result, log.read_text().splitlines() if log.exists() else []


def _no_warm_process_left(log: Path) -> None:
    """Soon after `dvc repro`'s return, its warm process has ended and removed its socket."""
    lines = log.read_text().splitlines() if log.exists() else []
    pids = [int(line.split()[2]) for line in lines if line.startswith("warm process ") and "ready" in line]
    deadline = time.monotonic() + ENDED_WITHIN
    while time.monotonic() < deadline and any(_running(pid) for pid in pids):
        time.sleep(0.02)
    assert not any(_running(pid) for pid in pids), lines
    folder = log.parent / "run" / f"judgeloop-warm-{os.getuid()}"
    assert not folder.exists() or not [p for p in folder.iterdir() if p.name.startswith("dvc-")]


def _running(pid: int) -> bool:
    """A process, not a zombie (this container's init may not reap the warm process's stage parent)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state != b"Z"


def _outputs(project: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((project / "out").glob("*.txt"))}


def test_later_stages_run_warm_and_write_what_cold_ones_write(project: Path) -> None:
    cold, cold_log = _repro(project, **{dvc_warm.SWITCH: "0"})
    cold_outputs, cold_lock = _outputs(project), (project / "dvc.lock").read_text()
    assert cold_log == []  # switched off: no warm process, not even looked for
    warm, warm_log = _repro(project)
    assert warm_log[0] == "cold starting the warm process: demo one"
    assert [line for line in warm_log if not line.startswith("warm process ")][1:] == [
        "warm demo two",
        "warm demo three",
    ]
    assert _outputs(project) == cold_outputs
    assert (project / "dvc.lock").read_text() == cold_lock
    assert cold_outputs["three.txt"].count("sigint <built-in function default_int_handler>") == 3
    for stage in ("one", "two", "three"):  # the stages' stdout reached DVC's
        assert f"{stage} on stdout" in warm.stdout and f"{stage} on stdout" in cold.stdout


def test_a_module_changed_between_stages_runs_the_later_ones_cold(project: Path) -> None:
    (project / "dvc.yaml").write_text(
        yaml.safe_dump(_dvc_yaml(between=f'python -c "{EDIT}" && touch out/between'))
    )
    _, log = _repro(project)
    runner = project / "stages" / "runner.py"
    assert "warm demo two" in log
    assert f"cold refused {runner} changed: demo three" in log
    three = (project / "out" / "three.txt").read_text()
    assert "demo two version 1 " in three
    assert "demo three version 2 sigint <built-in function default_int_handler> fds" in three


# The shells DVC may run a stage's command with: bash (a user's SHELL) and, with SHELL unset (as on a
# CI runner), /bin/sh (dash on Debian), which neither sets `_` nor execs a lone command.
SHELLS = pytest.mark.parametrize("shell", ["/bin/bash", None], ids=["bash", "no-SHELL"])


@SHELLS
def test_another_environment_runs_cold(project: Path, shell: str | None) -> None:
    (project / "dvc.yaml").write_text(
        yaml.safe_dump(_dvc_yaml(three="env WARM_TEST=1 python -m stages demo three"))
    )
    _, log = _repro(project, shell)
    assert "warm demo two" in log
    # bash also sets `_` to the command's path (/usr/bin/env where the stages before had python's)
    names = "WARM_TEST, _" if shell else "WARM_TEST"
    assert f"cold refused another environment: {names}: demo three" in log
    assert (project / "out" / "three.txt").exists()


def test_outside_dvc_nothing_is_started(project: Path) -> None:
    """DVC's variables without DVC: the stage runs cold, and no warm process is started."""
    log = project.parent / "warm.log"
    env = _env(project.parent, DVC_ROOT=str(project), DVC_STAGE="one", **{dvc_warm.LOG: str(log)})
    subprocess.run([sys.executable, "-m", "stages", "demo", "one"], cwd=project, env=env, check=True)
    assert not log.exists()
    assert not (project.parent / "run" / f"judgeloop-warm-{os.getuid()}").exists()


def test_a_stale_socket_of_a_dead_dvc_is_removed(project: Path, tmp_path: Path) -> None:
    folder = tmp_path / "run" / f"judgeloop-warm-{os.getuid()}"
    folder.mkdir(mode=0o700, parents=True)
    gone = folder / dvc_warm.socket_name(4_194_305, 5)  # above any pid_max: no such process
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:  # its warm process killed
        sock.bind(str(gone))
    other = folder / "not-ours.sock"
    other.write_text("")
    _, log = _repro(project)
    assert "warm demo two" in log
    assert not gone.exists() and other.exists()


def test_a_folder_of_another_mode_or_user_is_refused(project: Path, tmp_path: Path) -> None:
    folder = tmp_path / "run" / f"judgeloop-warm-{os.getuid()}"
    folder.mkdir(mode=0o700, parents=True)
    folder.chmod(0o755)
    _, log = _repro(project)
    assert log == [f"cold {folder} has mode 755, not 700: demo {stage}" for stage in ("one", "two", "three")]
    if os.getuid() == 0:  # as root: a folder of another user's (else: test_the_folder_checks_its_owner)
        folder.chmod(0o700)
        os.chown(folder, 65534, 65534)
        _, log = _repro(project)
        assert log == [
            f"cold {folder} is not a folder of this user's: demo {s}" for s in ("one", "two", "three")
        ]


def test_the_folder_checks_its_owner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    path, why = dvc_warm.socket_folder()
    assert path == str(tmp_path / f"judgeloop-warm-{os.getuid()}") and why == ""
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o700
    other = os.lstat(path).st_uid + 1
    monkeypatch.setattr(os, "getuid", lambda: other)
    theirs = tmp_path / f"judgeloop-warm-{other}"  # made by this (real) user: not the other's
    assert dvc_warm.socket_folder() == ("", f"{theirs} is not a folder of this user's")


def test_a_socket_of_another_user_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """SO_PEERCRED: the warm process's peer must be this user, and this user the warm process's."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    monkeypatch.setenv(dvc_warm.LOG, str(tmp_path / "log"))
    monkeypatch.setattr(os, "getuid", lambda: dvc_warm.peer_uid(ours) + 1)
    with ours, theirs:
        assert dvc_warm._hand_over(ours, "demo two") is None
        theirs.setblocking(False)
        with pytest.raises(BlockingIOError):  # nothing was sent: not the streams, not the environment
            theirs.recv(1)
    assert (tmp_path / "log").read_text() == "cold the socket is another user's: demo two\n"


@SHELLS
def test_interrupting_a_warm_stage_ends_it_as_a_cold_one_ends(project: Path, shell: str | None) -> None:
    """Ctrl-C reaches the terminal's foreground process group: DVC (which ignores it meanwhile), the
    shell DVC ran the command with, and the stage's process; the warm fork is in another session, so
    the stage passes it on, and dies of it as the fork did: DVC sees the stage fail."""
    stages = _dvc_yaml()
    stages["stages"]["three"]["cmd"] = "python -m stages demo sleep"  # type: ignore[index]
    (project / "dvc.yaml").write_text(yaml.safe_dump(stages))
    log = project.parent / "warm.log"
    env = _env(project.parent, shell, **{dvc_warm.LOG: str(log)})
    dvc = subprocess.Popen(
        [sys.executable, "-m", "dvc", "repro"],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # a process group of its own, as a terminal's foreground job has
    )
    sleeping = project / "out" / "sleeping"
    deadline = time.monotonic() + 120
    while not sleeping.exists() and time.monotonic() < deadline and dvc.poll() is None:
        time.sleep(0.05)
    fork = int(sleeping.read_text())
    os.killpg(dvc.pid, signal.SIGINT)  # what Ctrl-C does
    try:
        output, _ = dvc.communicate(timeout=60)
    finally:
        _end_group(dvc)
    assert dvc.returncode != 0
    assert "failed to reproduce 'three'" in output and "-2" in output, output
    assert not _running(fork)
    _no_warm_process_left(log)
    assert "warm demo sleep" in log.read_text().splitlines()


def _end_group(dvc: subprocess.Popen[str]) -> None:
    """Whatever a failing run left of DVC's process group (so that a failure here leaves nothing)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(dvc.pid, signal.SIGKILL)
    dvc.wait()


@pytest.mark.parametrize(
    ("argv", "dvc"),
    [
        (["/p/.venv/bin/python", "/p/.venv/bin/dvc", "repro"], True),  # the console script
        (["/usr/bin/python3", "-m", "dvc", "exp", "run"], True),
        (["/usr/local/bin/dvc", "repro"], True),  # a binary
        (["/p/.venv/bin/python", "./judgeloop", "repro"], False),  # DVC in judgeloop's process
        (["/p/.venv/bin/python", "-m", "pytest", "tests/test_dvc.py"], False),
        (["/p/.venv/bin/python", "-m", "dvcx"], False),
        ([], False),
    ],
)
def test_dvc_is_told_by_its_command_line(argv: list[str], dvc: bool) -> None:
    assert dvc_warm.is_dvc(argv) is dvc


def test_a_fork_of_a_warm_process_looks_for_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """`stages.runner` imported: a fork of this run's warm process or of `judgeloop repro`'s, where
    nothing changes (not even /proc is read)."""
    import stages.runner  # noqa: F401  (as in every warm process's fork)

    monkeypatch.setenv("DVC_STAGE", "one")
    monkeypatch.setenv("DVC_ROOT", "/")
    monkeypatch.setattr(dvc_warm, "dvc_process", lambda: pytest.fail("looked for DVC"))
    dvc_warm.run_warm()  # returned: the stage runs here, as it is


def test_a_changed_module_or_another_python_is_refused(tmp_path: Path) -> None:
    from stages import dvc_zygote

    module = tmp_path / "module.py"
    module.write_text("A = 1\n")
    files = [(str(module), dvc_zygote._identity(str(module))), *dvc_zygote.note(dvc_zygote.path_files())]
    assert dvc_zygote.changed({"executable": sys.executable}, files) == ""
    assert dvc_zygote.changed({"executable": "/usr/bin/python9"}, files) == "another python"
    module.write_text("A = 22\n")  # (a rewrite within one clock tick keeps mtime_ns: size differs)
    assert dvc_zygote.changed({"executable": sys.executable}, files) == f"{module} changed"
    module.unlink()
    assert dvc_zygote.changed({"executable": sys.executable}, files) == f"{module} is gone"


@pytest.mark.parametrize(
    ("three", "state", "why"),
    [
        ("python -O -m stages demo three", "optimize 1 umask 22", "interpreter options -O -m stages"),
        ("umask 077 && python -m stages demo three", "optimize 0 umask 77", "refused another process: umask"),
    ],
)
def test_a_stage_with_other_interpreter_options_or_process_state_runs_cold(
    project: Path, three: str, state: str, why: str
) -> None:
    """A fork takes the warm process's interpreter options and process state, a cold stage its own
    command line's and its caller's: a stage whose differ runs cold (review18)."""
    (project / "dvc.yaml").write_text(yaml.safe_dump(_dvc_yaml(three=three)))
    mask = os.umask(0o022)  # DVC's umask, as most users have it
    try:
        _, log = _repro(project)
    finally:
        os.umask(mask)
    assert "warm demo two" in log
    assert f"cold {why}: demo three" in log  # (other options: refused before asking, review24)
    assert (project / "out" / "three.state").read_text() == state


def test_a_module_rewritten_with_its_size_and_mtime_is_refused(tmp_path: Path) -> None:
    """`cp -p`, `touch -r`, `tar x`, `rsync -a` rewrite a file and put back an mtime; the change time
    cannot be put back (review18)."""
    from stages import dvc_zygote

    module = tmp_path / "module.py"
    module.write_text("A = 1\n")
    before = module.stat()
    files = [(str(module), dvc_zygote._identity(str(module)))]
    time.sleep(0.05)  # past the file system's clock tick
    with open(module, "r+") as same_inode:
        same_inode.write("A = 2\n")
    os.utime(module, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (module.stat().st_ino, module.stat().st_size, module.stat().st_mtime_ns) == (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
    )
    assert dvc_zygote.changed({"executable": sys.executable}, files) == f"{module} changed"


def test_a_module_changed_while_the_warm_process_imported_it_is_refused(tmp_path: Path) -> None:
    """A module read by the warm process's imports, then rewritten before its files were noted, would
    be noted as it is now and never found changed: a file changed after the warm process began is
    refused for the whole run (review18)."""
    from stages import dvc_zygote

    old = tmp_path / "old.py"
    old.write_text("A = 1\n")
    time.sleep(0.2)
    began = time.time_ns()  # the warm process begins its imports: old.py is read...
    new = tmp_path / "new.py"
    new.write_text("A = 1\n")  # ...and new.py rewritten meanwhile
    files = dvc_zygote.note([str(old), str(new)])
    assert dvc_zygote.changed_since(files, began) == f"{new} changed while the warm process started"
    assert dvc_zygote.changed_since(files[:1], began) == ""


def test_the_sockets_folder_is_this_user_s_under_a_shared_runtime_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """XDG_RUNTIME_DIR set to a folder shared by several users (/tmp, as `sudo` or a container may
    leave it): each user has a folder of their own there, not one folder the first user takes
    (review18)."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    folder, why = dvc_warm.socket_folder()
    assert (folder, why) == (str(tmp_path / f"judgeloop-warm-{os.getuid()}"), "")


def test_a_path_file_added_to_site_packages_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A .pth file (`pip install -e`) added, changed or removed between stages changes a cold stage's
    sys.path, not a fork's (review18)."""
    import site

    from stages import dvc_zygote

    monkeypatch.setattr(site, "getsitepackages", lambda: [str(tmp_path)])
    monkeypatch.setattr(site, "ENABLE_USER_SITE", False)
    (tmp_path / "old.pth").write_text("/nowhere\n")
    files = dvc_zygote.imported_files()
    request: dict[str, object] = {"executable": sys.executable}
    assert dvc_zygote.changed(request, files) == ""
    (tmp_path / "new.pth").write_text("/elsewhere\n")
    assert dvc_zygote.changed(request, files) == f"{tmp_path / 'new.pth'} added"
    (tmp_path / "new.pth").unlink()
    (tmp_path / "old.pth").unlink()
    assert dvc_zygote.changed(request, files) == f"{tmp_path / 'old.pth'} is gone"


def test_a_relative_tmpdir_is_not_a_folder_in_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TMPDIR=tmp (relative) would put the sockets' folder in the stage's folder, the project:
    /tmp is taken instead, as with a relative XDG_RUNTIME_DIR (review18)."""
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", "tmp")
    monkeypatch.chdir(tmp_path)
    folder, why = dvc_warm.socket_folder()
    assert (folder, why) == (f"/tmp/judgeloop-warm-{os.getuid()}", "")
    assert not (tmp_path / "tmp").exists()


def test_only_a_stage_of_its_dvc_is_answered() -> None:
    """The warm process forks for DVC's own stage commands only (its child, or its shell's): not for a
    process that merely reached the socket, such as one of another pid namespace sharing the folder
    (its pid 0 here) or of another DVC whose pid and start time collide (review18)."""
    from stages import dvc_zygote

    me = os.getpid(), dvc_warm.process_stat(os.getpid())[1]  # type: ignore[index]
    with subprocess.Popen(["sh", "-c", "sleep 30; :"]) as shell:  # a shell that forks its command
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (grandchild := _children(shell.pid)):
            time.sleep(0.01)
        try:
            assert dvc_zygote.stage_of(shell.pid, me)
            assert dvc_zygote.stage_of(grandchild[0], me)
            assert not dvc_zygote.stage_of(os.getpid(), me)
            assert not dvc_zygote.stage_of(0, me)
            assert not dvc_zygote.stage_of(shell.pid, (me[0], me[1] + 1))  # a DVC gone, its pid reused
        finally:
            shell.kill()


def _children(pid: int) -> list[int]:
    found = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(child) for child in found.read_text().split()] if found.exists() else []
