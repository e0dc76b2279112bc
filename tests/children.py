"""A child program run to its end for the exit tests: what it wrote and its status, its stdout
captured or, as `judgeloop repro | head -1` leaves it once head has gone, a pipe nobody reads."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path


def run_child(
    args: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    stdout_closed: bool = False,
) -> subprocess.CompletedProcess[str]:
    """`args` run in `cwd` with `env`, stderr captured (and stdout, unless `stdout_closed`: then
    stdout is a pipe whose reading end is closed, so the child's last flush of it fails)."""
    if not stdout_closed:
        return subprocess.run(
            list(args), cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=timeout, check=False
        )
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            list(args),
            cwd=cwd,
            env=dict(env),
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=timeout,
            check=False,
        )
    finally:
        os.close(write)
