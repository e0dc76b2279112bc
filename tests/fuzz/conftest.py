"""The fuzz suite's working folder, one per test module."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fuzz.support import only_inside


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """sandbox/project, the working folder: nothing may appear beside project/."""
    sandbox = tmp_path_factory.mktemp("sandbox")
    project = sandbox / "project"
    project.mkdir()
    before = Path.cwd()
    os.chdir(project)
    try:
        yield project
    finally:
        os.chdir(before)
    only_inside(sandbox, project)
