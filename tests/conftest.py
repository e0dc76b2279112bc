from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def shared_dir() -> Path:
    """../shared beside the checkout (CI has it); JUDGELOOP_SHARED overrides."""
    return Path(os.environ.get("JUDGELOOP_SHARED", ROOT.parent / "shared"))


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
