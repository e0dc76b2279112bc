"""A `judgeloop exp` killed outright (SIGKILL) cannot put the workspace back and leaves its copy of
the last good outputs under .judgeloop/snapshots/: the next `judgeloop exp` names it, with the
commands to go back to it or drop it (`judgeloop exp restore NAME`, `judgeloop exp drop NAME`), and
removes nothing (pipeline.tools.exp_snapshots)."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.tools import exp_snapshots
from pipeline.tools.dvc_run import exp
from pipeline.tools.exp_snapshots import (
    SNAPSHOTS,
    Snapshot,
    killed_runs_snapshots,
    name_killed_runs_snapshots,
)
from tests.conftest import ROOT
from tests.test_experiments import _commit, _repo, _run


def _copying(root: Path) -> subprocess.Popen[str]:
    """A process that has copied params.yaml aside as `judgeloop exp` does, and runs on."""
    code = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from pipeline.tools.exp_snapshots import Snapshot
        Snapshot(Path({str(root)!r}), {{Path("params.yaml")}})
        print("copied", flush=True)
        sys.stdin.readline()
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    assert run.stdout is not None and run.stdout.readline() == "copied\n"
    return run


def test_a_killed_run_s_snapshot_is_named_and_kept_a_live_run_s_is_not_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "params.yaml").write_text("a: 1\n")
    killed = _copying(tmp_path)
    killed.kill()  # SIGKILL
    killed.wait()
    [left] = list((tmp_path / SNAPSHOTS).iterdir())
    live = _copying(tmp_path)
    try:
        (tmp_path / SNAPSHOTS / "exp-link").symlink_to(left)
        (tmp_path / SNAPSHOTS / "exp-file").write_text("")
        assert killed_runs_snapshots(tmp_path) == [left]
        name_killed_runs_snapshots(tmp_path)
    finally:
        live.kill()
        live.wait()
    said = capsys.readouterr().err
    shown = os.path.relpath(left, tmp_path)
    assert said.count("judgeloop exp: ") == 1
    assert f"judgeloop exp: {shown} holds what a `judgeloop exp` that was killed copied aside" in said
    assert f"Fix: to go back to them, `judgeloop exp restore {left.name}`" in said
    assert f"once you do not need it, `judgeloop exp drop {left.name}`" in said
    assert (left / "params.yaml").read_text() == "a: 1\n"  # kept


HANGING = """\
stages:
  one:
    cmd: python one.py
    deps: [one.py]
    params: [a, hang]
    outs:
      - out/one.txt:
          cache: false
          persist: true
"""
CODE = {
    "params.yaml": "a: 1\nhang: false\n",
    "one.py": (
        "import time, yaml\n"
        "p = yaml.safe_load(open('params.yaml'))\n"
        "open('out/one.txt', 'w').write(f\"one made with a={p['a']}\\n\")\n"
        "if p['hang']:\n"
        "    open('hanging', 'w').close()\n"
        "    time.sleep(600)\n"
    ),
}


@pytest.mark.slow
def test_the_next_judgeloop_exp_names_what_a_killed_one_left(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo", HANGING, CODE)
    (repo / "out").mkdir()
    (repo / ".gitignore").write_text(".judgeloop/\nhanging\n")
    _run([sys.executable, "-m", "dvc", "repro"], repo)
    _commit(repo)
    cli = [sys.executable, "-m", "pipeline.tools.cli", "exp"]
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    run = subprocess.Popen([*cli, "-S", "a=2", "-S", "hang=true"], cwd=repo, env=env, start_new_session=True)
    try:
        for _ in range(1200):
            if (repo / "hanging").exists():
                break
            time.sleep(0.1)
        assert (repo / "hanging").exists(), "the stage never ran"
    finally:
        os.killpg(run.pid, signal.SIGKILL)  # the run and its stage, as the OOM killer or a power cut would
        run.wait()
    [left] = list((repo / SNAPSHOTS).iterdir())
    shown = os.path.relpath(left, repo)

    _run(["git", "checkout", "--", "params.yaml", "dvc.lock"], repo)
    again = _run([*cli, "-S", "a=3"], repo)
    assert f"judgeloop exp: {shown} holds what a `judgeloop exp` that was killed copied aside" in again.stderr
    assert (left / "params.yaml").read_text() == CODE["params.yaml"]  # named, never removed
    assert (repo / "out" / "one.txt").read_text() == "one made with a=3\n"
    # the message's advice, as one command: the last good outputs before the killed run come back
    _run([*cli, "restore", left.name], repo)
    assert (repo / "params.yaml").read_text() == CODE["params.yaml"]
    assert (repo / "out" / "one.txt").read_text() == "one made with a=1\n"
    assert not left.exists()


def test_a_snapshot_whose_copy_fails_is_not_left_for_the_next_run_to_name(tmp_path: Path) -> None:
    """A copy that fails (here a named pipe among the outputs, which no copy reads; a full disk alike)
    stops `judgeloop exp` before anything ran: its partial snapshot is removed and let go of, not left
    for the next run to name as a killed run's copy of the last good outputs."""
    (tmp_path / "a.csv").write_text("a\n")
    os.mkfifo(tmp_path / "b.pipe")
    fds = len(os.listdir("/proc/self/fd"))
    with pytest.raises(OSError):
        Snapshot(tmp_path, {Path("a.csv"), Path("b.pipe")})
    assert list((tmp_path / SNAPSHOTS).iterdir()) == []
    assert len(os.listdir("/proc/self/fd")) == fds
    assert (tmp_path / "a.csv").read_text() == "a\n"


def test_a_snapshot_s_odd_name_is_shown_as_escapes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder a user named there with a terminal's escape and a newline: named as escapes, on one line."""
    (tmp_path / SNAPSHOTS / "exp-\x1b[2Jx\ny").mkdir(parents=True)
    name_killed_runs_snapshots(tmp_path)
    said = capsys.readouterr().err
    assert "\x1b" not in said
    assert said.count("\n") == 1
    assert "exp-\\x1b[2Jx\\ny" in said


@pytest.mark.parametrize("fails", ["open", "flock"])
def test_a_snapshot_whose_set_up_fails_leaves_no_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fails: str
) -> None:
    """The folder made, then opened and locked: an open or an flock that fails (NFSv4 refuses an
    flock on a folder opened to be read) leaves no empty unlocked exp-* for the next run to name."""
    (tmp_path / "a.csv").write_text("a\n")

    def refused(*args: object) -> None:
        raise OSError(9, "Bad file descriptor")

    fds = len(os.listdir("/proc/self/fd"))
    with monkeypatch.context() as patched:
        patched.setattr(os if fails == "open" else fcntl, fails, refused)
        with pytest.raises(OSError):
            Snapshot(tmp_path, {Path("a.csv")})
    assert list((tmp_path / SNAPSHOTS).iterdir()) == []
    assert len(os.listdir("/proc/self/fd")) == fds


@pytest.fixture
def killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project a killed `judgeloop exp` left: its snapshot (params a: 1, out/one.txt old, out/two.txt
    not there yet) beside what the run changed."""
    monkeypatch.chdir(tmp_path)
    snapshot = tmp_path / SNAPSHOTS / "exp-abcd1234"
    (snapshot / "out").mkdir(parents=True)
    (snapshot / "params.yaml").write_text("a: 1\n")
    (snapshot / "out" / "one.txt").write_text("old\n")
    (tmp_path / "out").mkdir()
    (tmp_path / "params.yaml").write_text("a: 2\n")
    (tmp_path / "dvc.lock").write_text("made by the run\n")
    (tmp_path / "out" / "one.txt").write_text("new\n")
    (tmp_path / "out" / "two.txt").write_text("new only\n")
    outs = {Path("out/one.txt"), Path("out/two.txt")}
    monkeypatch.setattr(exp_snapshots, "stage_outputs", lambda root: outs)
    # as Snapshot marks the copy it makes, once whole: this project's, and what it holds
    exp_snapshots.mark(tmp_path, snapshot, {Path("params.yaml"), Path("out/one.txt")})
    return snapshot


@pytest.mark.parametrize("name", ["exp-abcd1234", ".judgeloop/snapshots/exp-abcd1234"])
def test_exp_restore_puts_a_killed_run_s_snapshot_back_and_removes_it(
    tmp_path: Path, killed: Path, name: str
) -> None:
    result = CliRunner().invoke(exp, ["restore", name])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "params.yaml").read_text() == "a: 1\n"
    assert (tmp_path / "out" / "one.txt").read_text() == "old\n"
    assert not (tmp_path / "out" / "two.txt").exists()  # new since: removed, as a failed run's restore does
    assert not (tmp_path / "dvc.lock").exists()  # none before the run
    assert not killed.exists()


def test_exp_drop_removes_a_killed_run_s_snapshot_only(tmp_path: Path, killed: Path) -> None:
    result = CliRunner().invoke(exp, ["drop", "exp-abcd1234"])
    assert result.exit_code == 0, result.output
    assert not killed.exists()
    assert (tmp_path / "params.yaml").read_text() == "a: 2\n"


@pytest.mark.parametrize("command", ["restore", "drop"])
def test_a_live_run_s_snapshot_or_a_name_elsewhere_is_refused(
    tmp_path: Path, killed: Path, command: str
) -> None:
    for name in ["../exp-abcd1234", "out", "exp-gone", f"{SNAPSHOTS}/../exp-abcd1234", "exp-x\0"]:
        result = CliRunner().invoke(exp, [command, name])
        assert result.exit_code != 0 and killed.exists(), (name, result.output)
    live = _copying(tmp_path)
    try:
        [held] = [p for p in (tmp_path / SNAPSHOTS).iterdir() if p != killed]
        result = CliRunner().invoke(exp, [command, held.name])
        assert result.exit_code == 1 and "still running" in result.output, result.output
        assert (held / "params.yaml").read_text() == "a: 2\n"
    finally:
        live.kill()
        live.wait()
    assert (tmp_path / "out" / "two.txt").exists()


def _unchanged(root: Path, snapshot: Path) -> None:
    assert (root / "params.yaml").read_text() == "a: 2\n"
    assert (root / "out" / "one.txt").read_text() == "new\n"
    assert (root / "out" / "two.txt").read_text() == "new only\n"
    assert snapshot.exists()


@pytest.mark.parametrize("whose", ["none", "another project", "a copy of this project"])
@pytest.mark.parametrize("command", ["restore", "drop"])
def test_a_snapshot_no_exp_of_this_project_made_is_neither_restored_nor_dropped(
    tmp_path: Path, killed: Path, command: str, whose: str
) -> None:
    """review16: a folder at a snapshot's name that no `judgeloop exp` of this project made (one
    committed under a plain `.judgeloop/`, another project's where two share one `.judgeloop` on
    another disk, this project's copied to where it no longer is this one) is not put back over the
    project (its params.yaml chose which outs are put back or removed: `README.md`, `.git`), nor
    removed (the other project's only copy of its last good outputs): both are refused, naming what
    to do by hand."""
    mark = killed / exp_snapshots.MARK
    if whose == "none":
        mark.unlink()
    else:
        other = tmp_path / "other"
        other.mkdir()
        exp_snapshots.mark(other, killed)
        if whose == "a copy of this project":  # the same path, a new folder there
            mark.write_text(mark.read_text().replace(str(other.resolve()), str(tmp_path.resolve())))
    result = CliRunner().invoke(exp, [command, killed.name])
    assert result.exit_code == 1 and "not made by a `judgeloop exp` of this project" in result.output
    assert "rm -r -- .judgeloop/snapshots/exp-abcd1234" in result.output, result.output
    _unchanged(tmp_path, killed)


@pytest.mark.parametrize("linked", ["params.yaml", "out", "out/one.txt"])
def test_a_link_in_a_snapshot_is_never_followed_by_restore(tmp_path: Path, killed: Path, linked: str) -> None:
    """review16: a snapshot `judgeloop exp` made holds no link where it copied a path or on the way
    to one (a file's copy is the file, a folder's path made of folders): one there now was put
    there by someone else, and restore refuses it, rather than copy what it leads to (a private
    key, say) over the project's params.yaml or outputs."""
    secret = tmp_path / "elsewhere"
    (secret / "out").mkdir(parents=True)
    (secret / "out" / "one.txt").write_text("private\n")
    (secret / "params.yaml").write_text("private\n")
    (secret / "one.txt").write_text("private\n")
    inside = killed / linked
    if inside.is_dir():
        os.rename(inside, tmp_path / "moved")
    else:
        inside.unlink()
    inside.symlink_to(secret / Path(linked).name)
    result = CliRunner().invoke(exp, ["restore", killed.name])
    assert result.exit_code == 1 and "a symbolic link" in result.output, result.output
    _unchanged(tmp_path, killed)


def test_a_run_killed_while_it_still_copied_leaves_a_copy_never_restored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """review16: a `judgeloop exp` killed while it copied the outputs aside (a big folder takes a
    while) ran nothing, and its half copy lacks the outs it had not reached: put back, they would be
    removed as new since. It has no mark, so restore refuses it, and the outs stay."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    for name in ["params.yaml", "out/a.txt", "out/b.txt"]:
        (tmp_path / name).write_text(f"{name} as it is\n")
    code = textwrap.dedent(f"""
        import time
        from pathlib import Path
        from pipeline.tools import exp_snapshots
        copy = exp_snapshots._copy
        def slow(source, target):
            if source.name == "b.txt":
                print("copying", flush=True)
                time.sleep(600)
            copy(source, target)
        exp_snapshots._copy = slow
        paths = {{Path("params.yaml"), Path("out/a.txt"), Path("out/b.txt")}}
        exp_snapshots.Snapshot(Path({str(tmp_path)!r}), paths)
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert run.stdout is not None and run.stdout.readline() == "copying\n"
    finally:
        run.kill()  # SIGKILL, as the OOM killer would
        run.wait()
    [half] = list((tmp_path / SNAPSHOTS).iterdir())
    monkeypatch.setattr(exp_snapshots, "stage_outputs", lambda root: {Path("out/a.txt"), Path("out/b.txt")})
    result = CliRunner().invoke(exp, ["restore", half.name])
    assert result.exit_code == 1 and "or not whole" in result.output, result.output
    assert (tmp_path / "out" / "b.txt").read_text() == "out/b.txt as it is\n"
    assert half.exists()


def test_the_named_restore_command_names_a_backslash_s_snapshot_as_it_is(
    tmp_path: Path, killed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """review16: `exp-a\\new` (a backslash and `n`, no newline) is shown `exp-a\\\\new` in a message;
    the command the message gives names the folder as it is, so that it runs as written."""
    import shlex

    odd = killed.with_name("exp-a\\new")
    killed.rename(odd)
    name_killed_runs_snapshots(tmp_path)
    said = capsys.readouterr().err
    command = said.split("`judgeloop exp restore ", 1)[1].split("`", 1)[0]
    result = CliRunner().invoke(exp, ["restore", *shlex.split(command)])
    assert result.exit_code == 0, result.output
    assert not odd.exists()
    assert (tmp_path / "params.yaml").read_text() == "a: 1\n"


def test_restore_waits_for_no_dvc_run_in_the_project(tmp_path: Path, killed: Path) -> None:
    """review16: the next `judgeloop exp` names a killed run's snapshot as it starts, and a user who
    runs the advised restore in another terminal then would put params.yaml and outputs back under a
    DVC run at work (this `exp`, a `repro`). Restore takes DVC's own lock of the project, as every DVC
    run does: held by a run, it is refused, nothing changed; let go, it restores."""
    subprocess.run([sys.executable, "-m", "dvc", "init", "--no-scm", "-q"], cwd=tmp_path, check=True)
    code = textwrap.dedent(f"""
        import sys
        from dvc.repo import Repo
        repo = Repo({str(tmp_path)!r})
        repo.lock.lock()
        print("held", flush=True)
        sys.stdin.readline()
    """)
    holder = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        result = CliRunner().invoke(exp, ["restore", killed.name])
        assert result.exit_code == 1 and "a DVC run is at work in this project" in result.output, (
            result.output
        )
        _unchanged(tmp_path, killed)
    finally:
        holder.kill()
        holder.wait()
    result = CliRunner().invoke(exp, ["restore", killed.name])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "params.yaml").read_text() == "a: 1\n"


def test_a_mark_that_is_a_link_to_another_snapshot_s_is_no_mark(tmp_path: Path, killed: Path) -> None:
    """review16: the mark is read only as a file of the snapshot's own: a folder whose mark is a link
    to a true snapshot's (beside it) is not taken for this project's whole copy."""
    evil = killed.with_name("exp-evil")
    evil.mkdir()
    (evil / "params.yaml").write_text("a: evil\n")
    (evil / exp_snapshots.MARK).symlink_to(killed / exp_snapshots.MARK)
    result = CliRunner().invoke(exp, ["restore", evil.name])
    assert result.exit_code == 1 and "not made by a `judgeloop exp` of this project" in result.output
    _unchanged(tmp_path, killed)
