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
