"""The warm process's sockets' folder (stages/dvc_warm.socket_folder) is one in which every socket's
path fits AF_UNIX's 107 bytes: a longer XDG_RUNTIME_DIR or TMPDIR (a job's scratch folder, a runner's
TMPDIR deep in its work tree) is passed over, as a relative one is, where before no socket could be
made in it and every stage ran cold ("no warm process (None)")."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from stages import dvc_warm

LONGEST = dvc_warm.socket_name(2**22, 2**64 - 1)  # a 7-digit pid, a 20-digit start time


def _parent(base: Path, path_length: int) -> Path:
    """A folder under `base` in whose sockets' folder the longest socket's path is `path_length` bytes."""
    own = f"judgeloop-warm-{os.getuid()}"
    name = "d" * (path_length - len(f"{base}///{own}{LONGEST}"))
    (base / name).mkdir()
    return base / name


@pytest.mark.parametrize("variable", ["XDG_RUNTIME_DIR", "TMPDIR"])
def test_a_folder_too_long_for_a_socket_is_passed_over(
    short_tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    fits, too_long = _parent(short_tmp_path, 107), _parent(short_tmp_path, 108)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv(variable, str(too_long))
    if variable == "XDG_RUNTIME_DIR":
        monkeypatch.setenv("TMPDIR", str(fits))
        expected = fits / f"judgeloop-warm-{os.getuid()}"
    else:
        expected = Path(f"/tmp/judgeloop-warm-{os.getuid()}")
    assert dvc_warm.socket_folder() == (str(expected), "")
    assert not (too_long / f"judgeloop-warm-{os.getuid()}").exists()


def test_the_longest_socket_binds_in_the_longest_folder_kept(
    short_tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(_parent(short_tmp_path, 107)))
    folder, why = dvc_warm.socket_folder()
    assert why == "" and Path(folder).parent == Path(os.environ["XDG_RUNTIME_DIR"])
    path = os.path.join(folder, LONGEST)
    assert len(os.fsencode(path)) == 107
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
        sock.bind(path)
    assert Path(path).is_socket()
