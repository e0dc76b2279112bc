"""Warm stages (pipeline/tools/warm_stages.py, stages/zygote.py): a stage run by a fork of the warm
process is the process DVC would have started, and whatever the warm process cannot vouch for runs
cold."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipeline.tools import warm_stages
from pipeline.tools.warm_stages import Zygote
from stages.zygote import refusal
from tests.children import run_child
from tests.conftest import ROOT

# A `stages` package of its own: the runner leaves state a fork could inherit wrongly; __main__
# writes what the process sees to the file its first argument names, then does what the second says.
RUNNER = """
import random, threading
IMPORTED_WITH = {"argv": list(__import__("sys").argv), "random": random.random()}

def preload():  # the warm process's libraries (stages.runner.LIBRARIES): one nothing else imports
    import colorsys
"""
MAIN = """
import atexit, json, os, random, sys, threading, time
import pipeline.fast_exit  # as stages/__main__.py imports it, before the runner
from stages.runner import IMPORTED_WITH

main = sys.modules["__main__"]
seen = {
    "argv": sys.argv, "orig_argv": sys.orig_argv, "path": sys.path, "cwd": os.getcwd(),
    "env": {k: v for k, v in os.environ.items() if k.startswith(("DVC_", "WARM_TEST"))},
    "main": sorted(vars(main)), "main_file": main.__file__, "name": __name__,
    "threads": threading.active_count(), "fds": sorted(os.listdir("/proc/self/fd")),
    "imported_argv": IMPORTED_WITH["argv"], "sigint": repr(__import__("signal").getsignal(2)),
    "modules": sorted(m for m in sys.modules if m.split(".")[0] in ("stages", "pipeline")),
    "stdout_tty": sys.stdout.isatty(), "executable": sys.executable,
    "preloaded": "colorsys" in sys.modules,
}
with open(sys.argv[1], "w") as out:
    json.dump(seen, out, indent=1, sort_keys=True)
print(f"stage {sys.argv[2]} on stdout")
print(f"stage {sys.argv[2]} on stderr", file=sys.stderr)
atexit.register(lambda: print(f"stage {sys.argv[2]}: atexit ran"))
if sys.argv[2].endswith("-own-exit"):  # a Python without the fast exit's private steps
    del atexit._run_exitfuncs
if sys.argv[2] == "fail":
    raise ValueError("the stage failed, as asked")
if sys.argv[2].startswith("interrupt"):
    raise KeyboardInterrupt
if sys.argv[2].startswith("exit3"):
    sys.exit(3)
if sys.argv[2] == "message":
    sys.exit("a message, not a number")
if sys.argv[2] == "sleep":
    open(sys.argv[1] + ".pid", "w").write(str(os.getpid()))
    time.sleep(60)
"""


@pytest.fixture
def tmp_path(short_tmp_path: Path) -> Path:
    """A folder whose path has no space (tests/conftest.py): the tests name files in it in command
    lines as DVC's, which are split at spaces (a path there is never quoted)."""
    return short_tmp_path


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "stages").mkdir()
    (tmp_path / "stages" / "__init__.py").write_text("")
    (tmp_path / "stages" / "runner.py").write_text(RUNNER)
    (tmp_path / "stages" / "__main__.py").write_text(MAIN)
    shutil.copy(ROOT / "stages" / "zygote.py", tmp_path / "stages" / "zygote.py")
    (tmp_path / "pipeline").mkdir()
    (tmp_path / "pipeline" / "__init__.py").write_text("")
    shutil.copy(ROOT / "pipeline" / "fast_exit.py", tmp_path / "pipeline" / "fast_exit.py")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.setenv("WARM_TEST", "1")
    return tmp_path


START_ENV: dict[str, str] = {}  # the environment the warm process started with, as DVC would pass it on


def _kwargs(root: Path, **extra: str) -> dict[str, Any]:
    env = {**START_ENV, "DVC_STAGE": "one", **extra}
    return {"cwd": str(root), "env": env, "close_fds": True, "shell": False}


def _cold(root: Path, *args: str) -> int:
    kwargs = _kwargs(root)
    return subprocess.run(["python", "-m", "stages", *args], cwd=kwargs["cwd"], env=kwargs["env"]).returncode


@pytest.fixture
def zygote(project: Path) -> Any:
    """The warm process, and the environment it started with (pytest changes its own between a test's
    phases, and the warm process would refuse a request that carries another)."""
    START_ENV.clear()
    START_ENV.update(os.environ)
    started = Zygote.start()
    assert started is not None
    yield started
    started.stop()


def _seen(path: Path) -> dict[str, Any]:
    seen: dict[str, Any] = json.loads(path.read_text())
    return seen


ENDINGS = {"ok": 0, "fail": 1, "exit3": 3, "message": 1, "interrupt": -signal.SIGINT}


@pytest.mark.parametrize("ending", [*ENDINGS, "exit3-own-exit", "interrupt-own-exit"])
def test_a_warm_stage_sees_what_a_cold_one_sees_and_ends_alike(
    project: Path, zygote: Zygote, capfd: pytest.CaptureFixture[str], ending: str
) -> None:
    cold_code = _cold(project, str(project / "cold.json"), ending)
    cold_out = capfd.readouterr()
    warm_code = zygote.run(f"python -m stages {project / 'warm.json'} {ending}", _kwargs(project))
    warm_out = capfd.readouterr()
    expected = ENDINGS[ending.removesuffix("-own-exit")]
    assert warm_code == cold_code == expected, warm_stages.last
    assert warm_out.out == cold_out.out
    assert warm_out.err.replace("warm.json", "cold.json") == cold_out.err  # the traceback too
    cold, warm = _seen(project / "cold.json"), _seen(project / "warm.json")
    assert warm["argv"][1] == str(project / "warm.json")
    warm["argv"][1] = warm["orig_argv"][3] = str(project / "cold.json")
    assert warm["imported_argv"] != cold["imported_argv"]  # imported in the warm process, before the request
    assert warm["preloaded"] and not cold["preloaded"]  # the runner's libraries, imported warm
    for seen in (cold, warm):
        del seen["imported_argv"], seen["preloaded"]
    assert warm == cold  # argv, sys.path (the folder first), env, __main__, fds, threads, SIGINT, modules


@pytest.mark.parametrize("caller", ["ignored", "handled"])
def test_a_warm_stage_has_sigint_as_a_cold_one_inherits_it(
    project: Path, zygote: Zygote, caller: str
) -> None:
    """A cold stage inherits SIGINT ignored across exec (a `judgeloop repro &` in a script, nohup, a
    CI runner) and otherwise gets Python's handler; through DVC's runner, replaced, the same."""
    run = warm_stages._run_warm(zygote, lambda *args, **kwargs: pytest.fail(f"ran cold: {warm_stages.last}"))
    before = signal.signal(
        signal.SIGINT, signal.SIG_IGN if caller == "ignored" else signal.default_int_handler
    )
    try:
        assert _cold(project, "cold.json", "ok") == 0
        run(None, "python -m stages warm.json ok", **_kwargs(project))  # as dvc.yaml writes it: no "/"
        after = signal.getsignal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, before)
    assert after is (signal.SIG_IGN if caller == "ignored" else signal.default_int_handler)  # put back
    expected = repr(signal.SIG_IGN) if caller == "ignored" else repr(signal.default_int_handler)
    assert _seen(project / "warm.json")["sigint"] == _seen(project / "cold.json")["sigint"] == expected


def test_the_libraries_a_stage_imports_later_are_imported_as_the_stage_would(tmp_path: Path) -> None:
    """stages.runner.preload, which the warm process runs before it forks: each library imported, and
    httpx without its command-line client, as an LLM stage imports it (without_httpx_cli)."""
    probe = (
        "import sys, stages.runner as r\n"
        "assert not any(n in sys.modules for n in r.LIBRARIES), 'imported by stages.runner already'\n"
        "r.preload()\n"
        "assert all(n in sys.modules for n in r.LIBRARIES)\n"
        "assert sys.modules['httpx._main'] is None\n"
    )
    subprocess.run([sys.executable, "-c", probe], cwd=ROOT, check=True)


def test_commands_other_than_python_m_stages_run_cold(project: Path, zygote: Zygote, tmp_path: Path) -> None:
    log = tmp_path / "warm.log"
    os.environ[warm_stages.LOG] = str(log)
    try:
        for cmd in (
            "python -m stages.index",
            "python -m stages 'a b'",
            "python -m stages a; rm x",
            "echo hi",
        ):
            assert not zygote.accepts(cmd, _kwargs(project))
        assert not zygote.accepts("python -m stages a b", {**_kwargs(project), "stdout": 1})
        assert zygote.accepts("python -m stages a b", _kwargs(project))
    finally:
        del os.environ[warm_stages.LOG]
    assert log.read_text().count("cold ") == 5


def test_the_warm_process_refuses_another_environment_or_folder(project: Path, zygote: Zygote) -> None:
    assert zygote.run(f"python -m stages {project / 'x.json'} ok", _kwargs(project, WARM_TEST="2")) is None
    assert zygote.run(f"python -m stages {project / 'x.json'} ok", _kwargs(project.parent)) is None
    assert not (project / "x.json").exists()
    assert zygote.run(f"python -m stages {project / 'x.json'} ok", _kwargs(project, DVC_EXP_NAME="e")) == 0
    env = {"A": "1", "DVC_STAGE": "s"}
    fds = [0, 1, 2]
    request: dict[str, object] = {"argv": [], "cwd": ".", "env": env}
    assert refusal(request, fds, {"A": "1"}, ".", threads=1) == ""
    assert refusal(request, fds, {"A": "2"}, ".", threads=1).startswith("another environment")
    assert refusal(request, fds[:2], {"A": "1"}, ".", threads=1) == "streams missing"
    assert refusal(request, fds, {"A": "1"}, ".", threads=2) == "a thread is running"


def test_without_a_warm_process_nothing_runs_warm(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(warm_stages.SWITCH, "0")
    assert Zygote.start() is None
    monkeypatch.delenv(warm_stages.SWITCH)
    (project / "stages" / "runner.py").write_text("raise ImportError('no runner here')\n")
    broken = Zygote.start()
    assert broken is not None
    try:
        assert not broken.accepts("python -m stages a b", _kwargs(project))
    finally:
        broken.stop()


CALLER = """
import os, sys
from pipeline.tools.warm_stages import Zygote
zygote = Zygote.start()
env = {**os.environ, "DVC_STAGE": "s"}
zygote.run(f"python -m stages {sys.argv[1]} sleep", {"cwd": os.getcwd(), "env": env, "close_fds": True})
"""


def test_a_killed_caller_leaves_no_stage_running(project: Path) -> None:
    """`judgeloop repro` killed while a stage runs warm: the warm process ends the stage and itself."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    caller = subprocess.Popen([sys.executable, "-c", CALLER, str(project / "s.json")], env=env)
    pid_file = project / "s.json.pid"
    for _ in range(1200):
        if pid_file.exists() and pid_file.read_text():
            break
        time.sleep(0.05)
    stage = int(pid_file.read_text())
    caller.kill()
    caller.wait()
    for _ in range(200):
        try:
            os.kill(stage, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.kill(stage, 9)
        raise AssertionError("the stage outlived its caller")


CLOSED_PIPE_CALLER = """
import json, os, subprocess, sys
from pipeline.tools.warm_stages import Zygote
zygote = Zygote.start()
env = {**os.environ, "DVC_STAGE": "s"}
kwargs = {"cwd": os.getcwd(), "env": env, "close_fds": True}
codes = {}
for ending in ("ok", "exit3", "interrupt"):
    args = [sys.argv[1], ending]
    codes[ending] = [
        zygote.run(" ".join(["python -m stages", *args]), kwargs),
        subprocess.run(["python", "-m", "stages", *args], env=env).returncode,
    ]
zygote.stop()
print(json.dumps(codes), file=sys.stderr)
"""


def test_a_warm_stage_whose_output_pipe_is_closed_ends_as_a_cold_one(project: Path) -> None:
    """Its stdout a pipe whose reader has gone (`judgeloop repro | head -1`): the exit's flush fails,
    which Python's exit gives 120 whatever the stage's code; an interrupt still ends by SIGINT."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    env["PYTHONPATH"] = str(ROOT)
    done = run_child(
        [sys.executable, "-c", CLOSED_PIPE_CALLER, str(project / "s.json")],
        cwd=project,
        env=env,
        timeout=120,
        stdout_closed=True,
    )
    codes = json.loads(done.stderr.splitlines()[-1])
    assert codes == {"ok": [120, 120], "exit3": [120, 120], "interrupt": [-signal.SIGINT] * 2}, done.stderr


def _judgeloop(root: Path, *args: str, check: bool = True, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(root), **env}
    full["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{full['PATH']}"
    done = subprocess.run(
        [sys.executable, "-m", "pipeline.tools.cli", *args],
        cwd=root,
        env=full,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 or not check, f"{args} failed:\n{done.stdout}\n{done.stderr}"
    return done


def _files(root: Path) -> dict[str, bytes]:
    paths = [root / "dvc.lock", *(root / "outputs").rglob("*"), *(root / "recordings").rglob("*")]
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(paths) if p.is_file()}


def _stage_lines(text: str) -> list[str]:
    """What the stages and DVC said, less the times."""
    return [re.sub(r"[\d.]+ s\b", "T s", line) for line in text.splitlines()]


@pytest.mark.slow
def test_the_papers_stages_replayed_warm_are_byte_identical_and_fail_alike(tmp_path: Path) -> None:
    root = tmp_path / "p"
    for name in ("pipeline", "stages", "data"):
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("dvc.yaml", "params.yaml", ".dvcignore"):
        shutil.copy(ROOT / name, root / name)
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["llm"].update(backend="fake", model="fake-model")
    params["data"]["limit"] = 2
    params["refine"]["max_iterations"] = 2
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=root, check=True)
    log = tmp_path / "warm.log"
    _judgeloop(root, "repro", "aggregate", JUDGELOOP_WARM_STAGES="0")  # recorded cold
    recorded = _files(root)

    warm = _judgeloop(root, "repro", "--replay", "aggregate", JUDGELOOP_WARM_STAGES_LOG=str(log))
    code_stage = "cold not `python -m stages ARGS`: python -m stages.code_digests"  # nothing to warm
    assert log.read_text().split("\n") == [
        code_stage,
        *(f"warm paper {s}" for s in ("assess", "judge", "refine", "aggregate")),
        "",
    ]
    assert _files(root) == recorded  # outputs, recordings, dvc.lock: byte for byte
    cold = _judgeloop(root, "repro", "--replay", "aggregate", JUDGELOOP_WARM_STAGES="0")
    assert _files(root) == recorded
    assert _stage_lines(warm.stdout) == _stage_lines(cold.stdout)
    assert _stage_lines(warm.stderr) == _stage_lines(cold.stderr)

    # A replay of a call never recorded: the stage fails, with the same status and words either way.
    params["data"]["limit"] = 3
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    failed_warm = _judgeloop(
        root, "repro", "--replay", "assess", check=False, JUDGELOOP_WARM_STAGES_LOG=str(log)
    )
    failed_cold = _judgeloop(root, "repro", "--replay", "assess", check=False, JUDGELOOP_WARM_STAGES="0")
    assert failed_warm.returncode == failed_cold.returncode != 0
    assert log.read_text().endswith("warm paper assess\n")
    assert "failed to reproduce 'assess'" in failed_warm.stderr
    assert _stage_lines(failed_warm.stderr) == _stage_lines(failed_cold.stderr)
