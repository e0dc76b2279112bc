"""Sizing only (issue 31): what a warm stage process that outlives each stage would give a plain
`dvc repro` of bench/scale.py's 133-item project. Not a feature: the bench itself plays the process
that a real design would have the first stage start (and tie to DVC's life).

    JUDGELOOP_SHARED=/work/shared .venv/bin/python bench/warm_sizing.py            # warm
    JUDGELOOP_SHARED=/work/shared .venv/bin/python bench/warm_sizing.py --cold     # as scale.py

Warm: before `dvc repro` starts, the bench starts stages/zygote.py (`stages.runner` and the
libraries imported, as `judgeloop repro` does) in the project with DVC's environment, and relays to
it over a SOCK_SEQPACKET socket whatever connects there. dvc.yaml's `python -m stages ARGS` become
`python warm_client.py ARGS`: a process that imports nothing of the project, sends its arguments,
folder, environment and stdin/stdout/stderr, waits for the fork's exit status and exits with it (on
a refusal it execs `python -m stages ARGS` cold). What it leaves out and a design would need: the
warm process started by the first stage and ended with DVC, refusing modules changed since it
imported them, signals passed on to the fork. Each stage's head then skips its imports; the first
stage's too here, where a real design would start the process during the first (cold) stage.
"""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import click

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHELL_VARS = ("PWD", "OLDPWD", "SHLVL", "_")  # set by the shell DVC runs a stage's command in
SOCKET = "JUDGELOOP_BENCH_WARM"

CLIENT = r"""import json, os, signal, socket, sys
SHELL_VARS, SOCKET = @VALUES@
args = sys.argv[1:]
env = {k: v for k, v in os.environ.items() if k not in SHELL_VARS}
sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
sock.connect(os.environ[SOCKET])
request = {"argv": args, "cwd": os.getcwd(), "env": env,
           "sigint_ignored": signal.getsignal(signal.SIGINT) is signal.SIG_IGN}
socket.send_fds(sock, [json.dumps(request).encode()], [0, 1, 2])
answer = sock.recv(4096).decode()
if not answer.startswith("started "):
    print(f"warm_client: {answer}: cold", file=sys.stderr)
    os.execv(sys.executable, [sys.executable, "-m", "stages", *args])
status = sock.recv(4096).decode()
os._exit(os.waitstatus_to_exitcode(int(status.split()[1])) if status.startswith("exit ") else 70)
""".replace("@VALUES@", repr((SHELL_VARS, SOCKET)))


ANSWERS: list[str] = []  # the warm process's first answer to each stage: `started PID` or `refused WHY`


def relay(listener: socket.socket, zygote: socket.socket) -> None:
    """Each client's request to the warm process, and its answers back, one client at a time."""
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
            socket.send_fds(zygote, [message], fds)
            for fd in fds:
                os.close(fd)
            ANSWERS.append(zygote.recv(4096).decode())
            conn.send(ANSWERS[-1].encode())
            if ANSWERS[-1].startswith("started "):
                conn.send(zygote.recv(4096))  # `exit STATUS`


def start(root: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], socket.socket]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with theirs:
        process = subprocess.Popen(
            ["python", "-m", "stages.zygote", str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            cwd=root,
            env=env,
        )
    ready = ours.recv(4096)
    if ready != b"ready":
        raise SystemExit(f"no warm process: {ready!r}")
    return process, ours


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option("--cold", is_flag=True, help="As bench/scale.py runs it (the pair's other side).")
@click.argument("scale_args", nargs=-1, type=click.UNPROCESSED)
def main(cold: bool, scale_args: tuple[str, ...]) -> None:
    from bench import scale  # its servers and project, only for a run

    before = _children_cpu()
    if cold:
        scale.main(args=["--no-replay", *scale_args], standalone_mode=False)
        click.echo(
            f"CPU of every process the bench started (servers included): {_children_cpu() - before:.2f} s"
        )
        return
    folder = Path(tempfile.mkdtemp(prefix="warm-"))
    path = folder / "relay.sock"
    os.environ[SOCKET] = str(path)
    original = scale.project
    held: dict[str, Any] = {}

    def project(root: Path, *args: Any, **kwargs: Any) -> None:
        original(root, *args, **kwargs)
        (root / "warm_client.py").write_text(CLIENT)
        dvc_yaml = (root / "dvc.yaml").read_text()
        (root / "dvc.yaml").write_text(
            dvc_yaml.replace("cmd: python -m stages ", "cmd: python warm_client.py ")
        )
        # The environment DVC gives its stages (scale.run_dvc's), less what the shell adds.
        path_var = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
        env = {k: v for k, v in {**os.environ, "PATH": path_var}.items() if k not in SHELL_VARS}
        process, zygote = start(root, env)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind(str(path))
        listener.listen()
        threading.Thread(target=relay, args=(listener, zygote), daemon=True).start()
        held.update(process=process, zygote=zygote, listener=listener)

    scale.project = project
    try:
        scale.main(args=["--no-replay", *scale_args], standalone_mode=False)
    finally:
        if held:
            held["listener"].close()
            held["zygote"].close()
            held["process"].wait(timeout=10)
        path.unlink(missing_ok=True)
        folder.rmdir()
    click.echo("warm process: " + "; ".join(a.split()[0] if a.startswith("started") else a for a in ANSWERS))
    click.echo(f"CPU of every process the bench started (servers included): {_children_cpu() - before:.2f} s")


def _children_cpu() -> float:
    """CPU seconds of this process's children that have ended (the warm process's forks with it)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    main()
