"""The warm stage process of a plain `dvc repro` (stages/dvc_warm.py, stages/dvc_zygote.py), under a
real DVC in a temporary git repository: a `stages` package of its own (the real client, warm process
and zygote, a runner that writes what it saw), so that every stage is quick; the paper's pipeline
warm and cold is tests/test_dvc_warm_pipeline.py."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from stages import dvc_warm
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}
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
    for name in ("__init__.py", "__main__.py", "dvc_warm.py", "dvc_zygote.py", "zygote.py"):
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
    return root


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (dvc_warm.SWITCH, dvc_warm.LOG, "PYTHONPATH")}
    env.update(GIT_IDENTITY, **extra)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["XDG_RUNTIME_DIR"] = str(tmp_path / "run")  # the sockets' folder: this test's own
    (tmp_path / "run").mkdir(mode=0o700, exist_ok=True)
    return env


def _repro(project: Path, **extra: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """`dvc repro` (the CLI, as a user runs it), and what the warm log says."""
    log = project.parent / "warm.log"
    log.unlink(missing_ok=True)
    env = _env(project.parent, **{dvc_warm.LOG: str(log), **extra})
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
    """Within a second of `dvc repro`'s return, its warm process has ended and removed its socket."""
    lines = log.read_text().splitlines() if log.exists() else []
    pids = [int(line.split()[2]) for line in lines if line.startswith("warm process ") and "ready" in line]
    deadline = time.monotonic() + 1
    while time.monotonic() < deadline and any(_running(pid) for pid in pids):
        time.sleep(0.02)
    assert not any(_running(pid) for pid in pids), lines
    folder = log.parent / "run" / "judgeloop-warm"
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


def test_another_environment_runs_cold(project: Path) -> None:
    (project / "dvc.yaml").write_text(
        yaml.safe_dump(_dvc_yaml(three="env WARM_TEST=1 python -m stages demo three"))
    )
    _, log = _repro(project)
    assert "warm demo two" in log
    # (and the shell's `_`, the command's path: /usr/bin/env)
    assert "cold refused another environment: WARM_TEST, _: demo three" in log
    assert (project / "out" / "three.txt").exists()


def test_outside_dvc_nothing_is_started(project: Path) -> None:
    """DVC's variables without DVC: the stage runs cold, and no warm process is started."""
    log = project.parent / "warm.log"
    env = _env(project.parent, DVC_ROOT=str(project), DVC_STAGE="one", **{dvc_warm.LOG: str(log)})
    subprocess.run([sys.executable, "-m", "stages", "demo", "one"], cwd=project, env=env, check=True)
    assert not log.exists()
    assert not (project.parent / "run" / "judgeloop-warm").exists()


def test_a_stale_socket_of_a_dead_dvc_is_removed(project: Path, tmp_path: Path) -> None:
    folder = tmp_path / "run" / "judgeloop-warm"
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
    folder = tmp_path / "run" / "judgeloop-warm"
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
    assert path == str(tmp_path / "judgeloop-warm") and why == ""
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o700
    monkeypatch.setattr(os, "getuid", lambda: os.lstat(path).st_uid + 1)
    assert dvc_warm.socket_folder() == ("", f"{path} is not a folder of this user's")


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


def test_interrupting_a_warm_stage_ends_it_as_a_cold_one_ends(project: Path) -> None:
    """Ctrl-C reaches the stage's process (DVC ignores it meanwhile); the warm fork is in another
    session, so the stage passes it on, and dies of it as the fork did: DVC sees the stage fail."""
    stages = _dvc_yaml()
    stages["stages"]["three"]["cmd"] = "python -m stages demo sleep"  # type: ignore[index]
    (project / "dvc.yaml").write_text(yaml.safe_dump(stages))
    log = project.parent / "warm.log"
    env = _env(project.parent, **{dvc_warm.LOG: str(log)})
    dvc = subprocess.Popen(
        [sys.executable, "-m", "dvc", "repro"],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    sleeping = project / "out" / "sleeping"
    deadline = time.monotonic() + 120
    while not sleeping.exists() and time.monotonic() < deadline and dvc.poll() is None:
        time.sleep(0.05)
    fork = int(sleeping.read_text())
    stage = next(
        int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _child_of(int(p.name), dvc.pid)
    )
    os.kill(stage, signal.SIGINT)
    output, _ = dvc.communicate(timeout=60)
    assert dvc.returncode != 0
    assert "failed to reproduce 'three'" in output and "-2" in output, output
    assert not _running(fork)
    _no_warm_process_left(log)
    assert "warm demo sleep" in log.read_text().splitlines()


def _child_of(pid: int, parent: int) -> bool:
    try:
        return int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[1]) == parent
    except (OSError, ValueError, IndexError):
        return False


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
    files = [(str(module), dvc_zygote._identity(str(module)))]
    assert dvc_zygote.changed({"executable": sys.executable}, files) == ""
    assert dvc_zygote.changed({"executable": "/usr/bin/python9"}, files) == "another python"
    module.write_text("A = 22\n")  # (a rewrite within one clock tick keeps mtime_ns: size differs)
    assert dvc_zygote.changed({"executable": sys.executable}, files) == f"{module} changed"
    module.unlink()
    assert dvc_zygote.changed({"executable": sys.executable}, files) == f"{module} is gone"
