"""Sizing only (issue 31): what a warm stage process that outlives each stage would give a plain
`dvc repro` of bench/scale.py's 133-item project. Not a feature: the bench itself plays the process
that a real design would have the first stage start (and tie to DVC's life).

    JUDGELOOP_SHARED=/work/shared .venv/bin/python bench/warm_sizing.py            # warm
    JUDGELOOP_SHARED=/work/shared .venv/bin/python bench/warm_sizing.py --cold     # as scale.py

Warm: the bench starts stages/zygote.py (`stages.runner` and the
libraries imported, as `judgeloop repro` does) in the project with DVC's environment, and relays to
it over a SOCK_SEQPACKET socket whatever connects there. dvc.yaml's `python -m stages ARGS` become
`python warm_client.py ARGS`: a process that imports nothing of the project, sends its arguments,
folder, environment and stdin/stdout/stderr, waits for the fork's exit status and exits with it (on
a refusal it execs `python -m stages ARGS` cold). What it leaves out and a design would need: the
warm process started by the first stage and ended with DVC, refusing modules changed since it
imported them, signals passed on to the fork. The first stage is refused and runs cold, and the
warm process starts then, beside it, as a design would have the first stage start it (--all-warm:
started before DVC, every stage warm); each later stage's head skips its imports.
"""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
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


def relay(listener: socket.socket, starting: Callable[[], socket.socket], all_warm: bool) -> None:
    """Each client's request to the warm process, and its answers back, one client at a time. Unless
    `all_warm`, the first client is refused (it runs cold) and the warm process starts then, as a
    design would have the first stage start it."""
    zygote = starting() if all_warm else None
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
            if zygote is not None:
                socket.send_fds(zygote, [message], fds)
            for fd in fds:
                os.close(fd)
            if zygote is None:
                ANSWERS.append("refused the first stage runs cold and starts the warm process")
                conn.send(ANSWERS[-1].encode())
            else:
                ANSWERS.append(zygote.recv(4096).decode())
                conn.send(ANSWERS[-1].encode())
                if ANSWERS[-1].startswith("started "):
                    conn.send(zygote.recv(4096))  # `exit STATUS`
        if zygote is None:
            zygote = starting()


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
@click.option("--all-warm", is_flag=True, help="The first stage warm too (the process started before DVC).")
@click.argument("scale_args", nargs=-1, type=click.UNPROCESSED)
def main(cold: bool, all_warm: bool, scale_args: tuple[str, ...]) -> None:
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

        def starting() -> socket.socket:
            process, zygote = start(root, env)
            held.update(process=process, zygote=zygote)
            return zygote

        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind(str(path))
        listener.listen()
        held["listener"] = listener
        threading.Thread(target=relay, args=(listener, starting, all_warm), daemon=True).start()

    scale.project = project
    try:
        scale.main(args=["--no-replay", *scale_args], standalone_mode=False)
    finally:
        for name in ("listener", "zygote"):
            if name in held:
                held[name].close()
        if "process" in held:
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
