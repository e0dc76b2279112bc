"""Fuzzing `judgeloop cache merge` with a collaborator's recordings folder (pipeline.tools.cache.merge:
read_stages, each stage through stage_reader.read_stage), and `cache stats` and `cache verify` after
it: theirs is someone else's, a stage's recording or two edited as any bytes, and sometimes one of
ours too (a pull request's). The property of tests/fuzz/support.py through the command line (a
clear error or an answer, never another exception), and: every call our recordings hold after the
merge verifies, and nothing is written outside the sandbox."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from pipeline.llm.recordings.stage_folders import CALLS_FILE
from pipeline.llm.recordings.stage_reader import read_all
from pipeline.tools.cli import main
from tests.fuzz.support import clear_or_correct, fuzz, inputs, laid_out, only_inside, time_bound
from tests.project import recorded_project


@pytest.fixture(scope="module")
def ours(sandbox: Path) -> dict[str, bytes]:
    """A recorded experiment in the sandbox's project (the working folder): its recordings' files."""
    recorded_project(sandbox, items=("901", "902"))
    recordings = sandbox / "recordings"
    return {
        str(path.relative_to(recordings)): path.read_bytes()
        for path in recordings.rglob("*")
        if path.is_file()
    }


def _cli(*args: str) -> tuple[int, str]:
    with time_bound():
        result = CliRunner().invoke(main, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception  # a traceback: the property fails
    return result.exit_code, result.output


@fuzz
@given(data=st.data())
def test_merging_a_collaborator_s_recordings_of_any_bytes(
    sandbox: Path, ours: dict[str, bytes], data: st.DataObject
) -> None:
    recordings, theirs = sandbox / "recordings", sandbox / "theirs"
    for folder in (recordings, theirs):
        laid_out(folder, ours)
    stages = sorted({name.split("/")[0] for name in ours if name.endswith(CALLS_FILE)})
    for stage in data.draw(st.lists(st.sampled_from(stages), min_size=1, max_size=2, unique=True)):
        (theirs / stage / CALLS_FILE).write_bytes(data.draw(inputs(ours[f"{stage}/{CALLS_FILE}"])))
    if data.draw(st.booleans()):  # ours edited too (a pull request's): stats and verify read it
        stage = data.draw(st.sampled_from(stages))
        (recordings / stage / CALLS_FILE).write_bytes(data.draw(inputs(ours[f"{stage}/{CALLS_FILE}"])))
    for args in (("--ours",), ("--theirs",)):
        _cli("cache", "merge", str(theirs), *args)
    _cli("cache", "stats")
    _cli("cache", "verify")
    merged = clear_or_correct(lambda: list(read_all(recordings)))  # an edited stage of ours: refused
    for loaded in merged if isinstance(merged, list) else []:  # what the merge wrote verifies
        assert loaded.call.record.problem() is None
    shutil.rmtree(theirs)
    only_inside(sandbox.parent, sandbox)


def test_merging_the_untouched_copy_adds_nothing(sandbox: Path, ours: dict[str, bytes]) -> None:
    theirs = sandbox / "theirs"
    for folder in (sandbox / "recordings", theirs):
        laid_out(folder, ours)
    code, out = _cli("cache", "merge", str(theirs))
    assert code == 0 and " + 0 new from theirs = " in out, out
    assert _cli("cache", "verify")[0] == 0
    shutil.rmtree(theirs)
