"""The warm stage process of a plain `dvc repro` attacked further (review24), under a real DVC
(tests/test_dvc_warm.py's project): a warm stage stopped by Ctrl-Z whose caller is then killed,
and a stage command with interpreter options, which no warm process can run."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

import pytest
import yaml

from tests.test_dvc_warm import _children, _dvc_yaml, _no_warm_process_left, _repro, _running
from tests.test_dvc_warm import _sigint_as_from_a_terminal as _sigint_as_from_a_terminal  # (autouse)
from tests.test_dvc_warm import project as project  # the fixture: a temporary git repo, DVC, its stages
from tests.test_dvc_warm_edges import _asleep, _sleeping_job, _state_becomes

pytestmark = pytest.mark.slow


def test_a_stopped_warm_stage_ends_when_its_caller_is_killed(project: Path) -> None:
    """Ctrl-Z stops DVC's job and the warm fork with it; then the job is killed (`kill -9 %1`, a CI
    cancel). A cold stage dies with its process group; the fork, in the warm process's session, is
    sent SIGTERM when its caller's socket closes, which a stopped process keeps pending until it is
    continued: it must be continued too, or it and the warm process waiting on it stay forever."""
    shell, log = _sleeping_job(project)
    fork = 0
    try:
        fork = _asleep(project, shell)
        dvc = _children(shell.pid)[0]
        os.killpg(dvc, signal.SIGTSTP)  # Ctrl-Z
        assert _state_becomes(fork, b"T"), "the warm fork was not stopped"
        os.killpg(dvc, signal.SIGKILL)  # the stopped job killed: DVC and the stage's caller
        shell.wait(timeout=60)
        _no_warm_process_left(log)
        assert not _running(fork), "the stopped warm fork was left behind"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGKILL)
        if fork:
            with contextlib.suppress(ProcessLookupError):
                os.kill(fork, signal.SIGKILL)
        for line in log.read_text().splitlines() if log.exists() else []:
            if line.startswith("warm process ") and "ready" in line:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(line.split()[2]), signal.SIGKILL)
        shell.wait()
    assert "warm demo sleep" in log.read_text().splitlines()


def test_a_stage_with_interpreter_options_starts_no_warm_process(project: Path) -> None:
    """`python -B -m stages` (or -I, -X pycache_prefix=...): a warm process could never run it
    (dvc_zygote refuses other options), and one started by it runs without those options: under -B
    it wrote byte-code into the project where a cold `-B` run writes none (under -I it would run the
    user's site-packages and PYTHON* variables that an isolated stage ignores). It runs cold, saying
    why, and starts nothing."""
    stages = _dvc_yaml()
    for stage in stages["stages"].values():  # type: ignore[attr-defined]
        stage["cmd"] = stage["cmd"].replace("python -m", "python -B -m")
    (project / "dvc.yaml").write_text(yaml.safe_dump(stages))
    _, log = _repro(project, None, PYTHONDONTWRITEBYTECODE="")
    assert "cold interpreter options -B -m stages: demo three" in log, log
    assert not [line for line in log if line.startswith("warm process ")], log
    assert not list((project / "stages").glob("__pycache__/*.pyc"))


# A package stages/runner/ added beside the unchanged stages/runner.py (VERSION 3 in it): Python's
# finder takes a package before a module of the same name in one folder (and an extension module
# before either, and any of them in a folder earlier on sys.path: a `pydantic.py` in the project).
SHADOW = (
    "import pathlib; p = pathlib.Path('stages/runner'); p.mkdir(); "
    "(p / '__init__.py').write_text(pathlib.Path('stages/runner.py').read_text()"
    ".replace('VERSION = 1', 'VERSION = 3')); open('out/between', 'w').write('')"
)


def test_a_module_shadowed_by_a_file_added_since_the_imports_runs_cold(project: Path) -> None:
    """No imported file changed, but a cold stage's import finds another file first: a fork would run
    the module the warm process found."""
    (project / "dvc.yaml").write_text(yaml.safe_dump(_dvc_yaml(between=f'python -c "{SHADOW}"')))
    _, log = _repro(project)
    assert "warm demo two" in log, log
    assert f"cold refused {project / 'stages'} changed: stages.runner shadowed: demo three" in log, log
    assert (project / "out" / "three.txt").read_text().splitlines()[-1].startswith("demo three version 3")


def test_a_module_found_elsewhere_now_is_told_and_a_file_of_another_name_is_not(tmp_path: Path) -> None:
    """stages/shadowing.py in this process: a module found in a later sys.path folder, then a file of
    its name added to an earlier one (a `json.py` in the project); an unrelated file is no refusal,
    nor is a namespace folder of that name (a module elsewhere comes before it)."""
    import importlib

    from stages import shadowing

    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (second / "review24_shadowed.py").write_text("WORD = 2\n")
    sys.path[:0] = [str(first), str(second)]
    try:
        importlib.import_module("review24_shadowed")
        folders = shadowing.noted(lambda ctime: False)
        assert shadowing.shadowed(folders) == ""
        (first / "unrelated.py").write_text("")
        (first / "review24_shadowed").mkdir()  # a namespace portion: the module in `second` still wins
        assert shadowing.shadowed(folders) == ""
        (first / "review24_shadowed.py").write_text("WORD = 1\n")
        assert shadowing.shadowed(folders) == f"{first} changed: review24_shadowed shadowed"
    finally:
        sys.path[:] = [entry for entry in sys.path if entry not in (str(first), str(second))]
        sys.modules.pop("review24_shadowed", None)
        importlib.invalidate_caches()


def test_code_that_differs_only_in_what_code_equality_leaves_out_is_not_the_same() -> None:
    """A crafted `.pyc` whose code compares equal to the source's (CPython's code equality compares
    the local variables' names, not their kinds, and not the stack size the interpreter trusts)
    is other code: refused (stages/bytecode.alike)."""
    from stages.bytecode import alike

    module = compile("def f():\n    a = 1\n    return a\n", "m.py", "exec")
    function = module.co_consts[0]
    assert alike(function, function.replace())
    other_stack = function.replace(co_stacksize=function.co_stacksize + 5)
    a_cell = function.replace(co_varnames=(), co_cellvars=("a",), co_nlocals=0)
    for crafted in (other_stack, a_cell):
        assert crafted == function  # as CPython compares code
        assert not alike(function, crafted)
        assert not alike(module, module.replace(co_consts=(crafted, *module.co_consts[1:])))


# A site customization that keeps a file open in every Python (a logging handler, a coverage hook's
# .pth): Python opens it close-on-exec (PEP 446), so no stage is given it, but each has its own.
SITECUSTOMIZE = "import os\nKEPT = open(os.devnull)\n"


def test_an_fd_this_python_opened_itself_is_no_fd_given_by_the_caller(project: Path) -> None:
    """Only fds that came across the exec (inheritable: a shell's `3>FILE`) are a caller's; one that
    this Python's start opened (close-on-exec) is not, and it turned every stage cold, silently
    (only JUDGELOOP_WARM_LOG told): the warm process, started the same way, has its own."""
    site = project.parent / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    _, log = _repro(project, None, PYTHONPATH=str(site))
    assert "warm demo two" in log and "warm demo three" in log, log
