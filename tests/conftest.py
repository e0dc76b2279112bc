from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GIT_SETTINGS = {"commit.gpgSign": "false", "tag.gpgSign": "false", "core.hooksPath": os.devnull}


def shared_dir() -> Path:
    """../shared beside the checkout (CI has it); JUDGELOOP_SHARED overrides."""
    return Path(os.environ.get("JUDGELOOP_SHARED", ROOT.parent / "shared"))


def pytest_configure(config: pytest.Config) -> None:
    """The suite runs as from a terminal, whatever started it. A shell that starts a command in the
    background (`make test &`, a CI runner) or `nohup` leaves SIGINT ignored, and every child inherits
    that: a test that interrupts a stage would interrupt nothing, or pass without testing what it
    names. Python's own handler here (a handler is reset to the default at each child's exec), and
    SIGINT and SIGTERM unblocked."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


@pytest.fixture(autouse=True)
def _isolate_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # A developer's own JUDGELOOP_* settings must not leak into the tests.
    for name in list(os.environ):
        if name.startswith("JUDGELOOP_") and name != "JUDGELOOP_SHARED":
            monkeypatch.delenv(name)
    # The DVC projects tests make have `dvc init`'s default config, under which every dvc command
    # collects a usage report at its exit and starts a process to send it (0.1-0.3 s each, and a
    # process outliving the test that tries a network tests must not need); the repository's own
    # .dvc/config turns it off.
    monkeypatch.setenv("DVC_NO_ANALYTICS", "1")
    # Commits the tests make (git's, `dvc exp run`'s) need an identity, which a CI runner or a fresh
    # account has not configured.
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "t")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "t@example.com")
    # ...and none of a developer's own settings that would stop them: signing (a key, an agent) and
    # hooks (core.hooksPath names them for every repository).
    for n, (key, value) in enumerate(GIT_SETTINGS.items()):
        monkeypatch.setenv(f"GIT_CONFIG_KEY_{n}", key)
        monkeypatch.setenv(f"GIT_CONFIG_VALUE_{n}", value)
    monkeypatch.setenv("GIT_CONFIG_COUNT", str(len(GIT_SETTINGS)))


@pytest.fixture
def short_tmp_path() -> Iterator[Path]:
    """A new folder with a short path, for a test that puts AF_UNIX sockets in it: a socket's path
    holds at most 107 bytes, and pytest's tmp_path (under TMPDIR, named after the test) may be past
    that. Under /tmp, which Linux always has; removed after the test."""
    folder = Path(tempfile.mkdtemp(prefix="jl-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def fresh_memo() -> Iterator[None]:
    """Every recording verified from scratch: the in-process memo of verified content forgotten
    before the test and after it (pipeline.llm.recordings.verified_memo)."""
    from pipeline.llm.recordings import verified_memo

    verified_memo.forget_in_process()
    yield
    verified_memo.forget_in_process()


@pytest.fixture
def small_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stage's recording sharded past 8 calls, so that small tests write shards."""
    from pipeline.llm.recordings import shards

    monkeypatch.setattr(shards, "SHARD_AT", 8)


@pytest.fixture
def whole_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The shards (and tables) read whole from disk (shards.shard_bytes), by name."""
    from pipeline.llm.recordings import shards

    read: list[str] = []
    real = shards.shard_bytes

    def counting(directory: Path, name: str, sha: str, given: dict[str, bytes] | None) -> bytes:
        if given is None:
            read.append(name)
        return real(directory, name, sha, given)

    monkeypatch.setattr(shards, "shard_bytes", counting)
    return read
