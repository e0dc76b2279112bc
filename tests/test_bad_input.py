"""The bad-input suite: every kind of input the project reads, broken six ways, gives a clear error
(the file, the line where there is one, and the fix) or the documented skip-and-count, and the
outputs of the last good run are still there afterwards.

    kinds        the data the registered designs' stages read (found from their stage specs: a
                 `${section.key}` dependency that names a committed data file or folder), and what
                 the tools read: transcript labels, judge-evaluate batches, calibrate's human
                 ratings, params.yaml, the recordings
    corruptions  empty; truncated (cut inside its last line); non-UTF-8 (a byte on line 2);
                 oversized (past the size limit, lowered here to just under the good file's size);
                 wrong-type (a field of another type on line 2); duplicate-id (a row, key or id again)

A stage is run as DVC runs it (stages.runner.run_stage, replay mode, in a copy of the project), so
its last good outputs and recordings are there to check afterwards.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from pipeline.data import input_files
from pipeline.errors import JudgeloopError
from pipeline.experiments.design import PARAM_REFERENCE, param_value
from pipeline.experiments.registry import designs
from pipeline.llm import settings
from pipeline.llm.backends import register_backend
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.recordings import line_checks
from pipeline.testing.structured_responder import structured_responder
from pipeline.tools.cli import main
from stages.runner import run_stage
from tests.conftest import ROOT

CORRUPTIONS = ("empty", "truncated", "non-utf8", "oversized", "wrong-type", "duplicate-id")
# lines in; lines out, and the line an error about them must name (None: the file as a whole)
Edit = Callable[[list[str]], tuple[list[str], int | None]]


# -- the corruptions, on a file's lines ----------------------------------------------------------


def truncated(lines: list[str]) -> list[str]:
    """Cut a third of the way into the last line: a file whose writer was killed."""
    last = len(lines) - 1
    while not lines[last].strip():
        last -= 1
    return [*lines[:last], lines[last][: max(1, len(lines[last]) // 3)]]


def jsonl_wrong_type(lines: list[str]) -> tuple[list[str], int | None]:
    """Every value of line 2 a number."""
    row = json.loads(lines[1])
    return [lines[0], json.dumps({key: 7 for key in row}), *lines[2:]], 2


def jsonl_duplicate(lines: list[str]) -> tuple[list[str], int | None]:
    """Line 1 again, at the end."""
    body = [line for line in lines if line.strip()]
    return [*body, body[0]], len(body) + 1


def replace_first(old: str, new: str) -> Edit:
    """The first line holding `old` with it replaced by `new`."""

    def edit(lines: list[str]) -> tuple[list[str], int | None]:
        index = next(i for i, line in enumerate(lines) if old in line)
        return [*lines[:index], lines[index].replace(old, new, 1), *lines[index + 1 :]], index + 1

    return edit


def append_line(line: int) -> Edit:
    """Line `line` again, at the end."""

    def edit(lines: list[str]) -> tuple[list[str], int | None]:
        body = [text for text in lines if text.strip()]
        return [*body, lines[line - 1]], len(body) + 1

    return edit


def append_block(start: str, stop: str) -> Edit:
    """A copy of the lines from the one starting `start` up to the one starting `stop`, at the end."""

    def edit(lines: list[str]) -> tuple[list[str], int | None]:
        first = next(i for i, line in enumerate(lines) if line.startswith(start))
        end = next(i for i, line in enumerate(lines) if i > first and line.startswith(stop))
        return [*lines, *lines[first:end]], len(lines) + 1

    return edit


# -- the kinds ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """One input kind: its good file (relative to the repository), how wrong-type and duplicate-id
    break it, and where each corruption's error must point (a line, or None: the file as a whole)."""

    name: str
    good: str
    wrong_type: Edit
    duplicate: Edit
    truncated_line: bool = True  # the error names the cut line (False: YAML says the file as a whole)


KINDS = {
    "transcripts": Kind(
        "transcripts",
        "data/demo/901_P/901_TRANSCRIPT.csv",
        replace_first("26.500", "soon"),
        lambda lines: (lines, None),  # a second file with the same id, beside it: see the test
    ),
    "labels": Kind(
        "labels",
        "data/demo/labels.csv",
        replace_first("901,0,0", "901,zero,0"),
        append_line(2),
    ),
    "rag-rows": Kind("rag-rows", "data/rag-demo/rows.jsonl", jsonl_wrong_type, jsonl_duplicate),
    "catalog": Kind(
        "catalog",
        "data/selection/catalog_fictional.csv",
        replace_first(",27,", ",popular,"),
        append_line(2),
    ),
    "listening-requests": Kind(
        "listening-requests",
        "data/selection/requests.yaml",
        replace_first("weight: 0.5", "weight: heavy"),
        append_block("  - id: deep-focus", "  - id: morning-run"),
        truncated_line=False,
    ),
    "ratings (SummEval)": Kind(
        "ratings (SummEval)", "data/summeval-demo/summeval-demo.jsonl", jsonl_wrong_type, jsonl_duplicate
    ),
}
# Which kind each data parameter a design's stage depends on holds. A design that adds a parameter
# naming input data adds it here, with its corruptions (test_every_data_input_is_in_the_suite).
PARAM_KINDS = {
    "data.transcripts": "transcripts",
    "rag.rows": "rag-rows",
    "regen_generate.rows": "rag-rows",
    "selection.catalog": "catalog",
    "selection.requests": "listening-requests",
    "summeval.corpus": "ratings (SummEval)",
}


@dataclass(frozen=True)
class StageInput:
    design: str
    stage: str
    param: str  # section.key


def stage_inputs() -> list[StageInput]:
    """The first stage of each design that reads each data parameter (from the design's specs)."""
    found: dict[tuple[str, str], StageInput] = {}
    for design in designs():
        params = design.params()
        for stage in design.stages:
            for dep in stage.deps:
                for param in PARAM_REFERENCE.findall(dep):
                    value = str(param_value(params, param))
                    if value.startswith("data/") and (design.name, param) not in found:
                        found[design.name, param] = StageInput(design.name, stage.name, param)
    return list(found.values())


def test_every_data_input_is_in_the_suite() -> None:
    assert {i.param for i in stage_inputs()} == set(PARAM_KINDS)


# -- running a stage in a copy of the project --------------------------------------------------------


def tree(root: Path, *folders: str) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for folder in folders
        for path in sorted((root / folder).rglob("*"))
        if path.is_file()
    }


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the committed experiment (params, data, outputs, recordings, dvc.lock), replaying."""
    for name in ("params.yaml", "dvc.lock"):
        shutil.copy(ROOT / name, tmp_path / name)
    for folder in ("data", "outputs", "recordings"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JUDGELOOP_CACHE_MODE", "replay")
    monkeypatch.setenv("JUDGELOOP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("JUDGELOOP_PARAMS", raising=False)
    return tmp_path


LARGEST_DATA_FILE = max(p.stat().st_size for p in (ROOT / "data").rglob("*") if p.is_file())


def corrupt(path: Path, kind: Kind, corruption: str, monkeypatch: pytest.MonkeyPatch) -> int | None:
    """Break the file at `path` (a copy of the kind's good file); the line the error must name."""
    good = path.read_bytes()
    lines = good.decode("utf-8").split("\n")
    line: int | None = None
    if corruption == "empty":
        out = b""
    elif corruption == "truncated":
        cut = truncated(lines)
        out, line = "\n".join(cut).encode(), (len(cut) if kind.truncated_line else None)
    elif corruption == "non-utf8":
        first, second, *rest = lines
        out, line = (
            "\n".join([first, second[:3]]).encode() + b"\xff" + "\n".join([second[3:], *rest]).encode(),
            2,
        )
    elif corruption == "oversized":
        # The limit lowered to the largest good file's size: every other input still fits.
        monkeypatch.setattr(input_files, "MAX_INPUT_BYTES", LARGEST_DATA_FILE)
        out = good * (LARGEST_DATA_FILE // len(good) + 1)
    elif corruption == "wrong-type":
        broken, line = kind.wrong_type(lines)
        out = "\n".join(broken).encode()
    else:
        broken, line = kind.duplicate(lines)
        out = "\n".join(broken).encode()
    path.write_bytes(out)
    return line


def assert_clear(message: str, shown: str, line: int | None) -> None:
    assert "Traceback" not in message
    where = f"{shown}:{line}" if line is not None else shown
    assert where in message, f"expected {where!r} in: {message}"
    assert re.search(r"\bFix\b", message), f"no fix in: {message}"


def point_at(project: Path, param: str, value: str) -> None:
    params = yaml.safe_load((project / "params.yaml").read_text())
    section, key = param.split(".")
    params[section][key] = value
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


STAGE_CASES = [(i, c) for i in stage_inputs() for c in CORRUPTIONS]


@pytest.mark.parametrize(
    ("source", "corruption"), STAGE_CASES, ids=[f"{i.design}-{i.param}-{c}" for i, c in STAGE_CASES]
)
def test_a_stage_refuses_broken_data_naming_file_line_and_fix(
    project: Path, monkeypatch: pytest.MonkeyPatch, source: StageInput, corruption: str
) -> None:
    kind = KINDS[PARAM_KINDS[source.param]]
    section, key = source.param.split(".")
    good_value = Path(yaml.safe_load((project / "params.yaml").read_text())[section][key])
    # The parameter names a copy, so that the committed data stays as the good run read it.
    copy = Path("bad") / good_value.name
    (project / "bad").mkdir(exist_ok=True)
    if (project / good_value).is_dir():
        shutil.copytree(project / good_value, project / copy)
        target = project / copy / Path(kind.good).relative_to(good_value)
    else:
        shutil.copy(project / good_value, project / copy)
        target = project / copy
    shown = str(target.relative_to(project))
    line = corrupt(target, kind, corruption, monkeypatch)
    if kind.name == "transcripts" and corruption == "duplicate-id":
        twin = target.parent.parent / target.name  # 901_TRANSCRIPT.csv beside 901_P/: id 901 twice
        shutil.copy(target, twin)
        shown, line = str(target.relative_to(project)), None
    point_at(project, source.param, str(copy))
    before = tree(project, "outputs", "recordings")
    with pytest.raises(JudgeloopError) as caught:
        run_stage(source.design, source.stage)
    assert_clear(caught.value.message, shown, line)
    assert tree(project, "outputs", "recordings") == before  # the last good run's outputs are intact


# -- what the tools read --------------------------------------------------------------------------


def insert_after(marker: str, text: str) -> Edit:
    """`text` as a new line after the first line holding `marker`."""

    def edit(lines: list[str]) -> tuple[list[str], int | None]:
        index = next(i for i, line in enumerate(lines) if marker in line)
        return [*lines[: index + 1], text, *lines[index + 1 :]], index + 2

    return edit


TOOL_KINDS = {
    "labels": KINDS["labels"],
    "params": Kind(
        "params",
        "params.yaml",
        replace_first("    temperature: 0.0", "    temperature: hot"),
        insert_after("    temperature: 0.0", "    temperature: 0.5"),
    ),
    "recordings": Kind(
        "recordings",
        "recordings/assess/calls.jsonl",
        jsonl_wrong_type,
        jsonl_duplicate,
    ),
}


@pytest.mark.parametrize("corruption", CORRUPTIONS)
@pytest.mark.parametrize("kind_name", sorted(TOOL_KINDS))
def test_labels_params_and_recordings_broken_stop_the_stage_naming_file_line_and_fix(
    project: Path, monkeypatch: pytest.MonkeyPatch, kind_name: str, corruption: str
) -> None:
    kind = TOOL_KINDS[kind_name]
    target = project / kind.good
    if kind_name == "labels":
        point_at(project, "data.labels", kind.good)
    if kind_name == "params" and corruption == "oversized":
        monkeypatch.setattr(settings, "MAX_PARAMS_BYTES", target.stat().st_size - 1)
    if kind_name == "recordings" and corruption == "oversized":
        monkeypatch.setattr(line_checks, "MAX_RECORDING_BYTES", target.stat().st_size - 1)
    before = tree(project, "outputs", "recordings")
    line = (
        corrupt(target, kind, corruption, monkeypatch)
        if kind_name != "params" or corruption != "oversized"
        else None
    )
    shown = kind.good
    if kind_name == "recordings":  # refused as a whole: it no longer matches its entry in dvc.lock
        shown, line = "recordings/assess does not match its entry in dvc.lock", None
        if corruption == "oversized":  # refused by its size first, before a byte of it is read or hashed
            shown = f"{kind.good}: 0.0 GiB, more than a recording holds"
        before = {k: v for k, v in before.items() if k != kind.good}
    with pytest.raises(JudgeloopError) as caught:
        run_stage("paper", "assess")
    assert_clear(caught.value.message, shown, line)
    after = tree(project, "outputs", "recordings")
    assert {k: v for k, v in after.items() if k != kind.good} == before


# -- judge-evaluate batches and calibrate's ratings: the CLI --------------------------------------

register_backend("bad-input-fake", lambda s, cache: FakeBackend(structured_responder, name=s.model))
BATCH_SKIPS = {"wrong-type", "duplicate-id"}  # documented: skipped into the errors file, counted


@pytest.mark.parametrize("corruption", CORRUPTIONS)
def test_a_broken_batch_is_refused_or_its_bad_rows_skipped_and_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, corruption: str
) -> None:
    monkeypatch.chdir(tmp_path)
    llm = {"backend": "bad-input-fake", "model": "m"}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"llm": llm, "cache": {"dir": "cache"}}))
    shutil.copy(ROOT / "data/rag-demo/rows.jsonl", tmp_path / "rows.jsonl")
    good = CliRunner().invoke(main, ["judge-evaluate", "--batch", "rows.jsonl", "--out", "scores.jsonl"])
    assert good.exit_code == 0, good.output
    last_good = (tmp_path / "scores.jsonl").read_bytes()
    line = corrupt(tmp_path / "rows.jsonl", KINDS["rag-rows"], corruption, monkeypatch)
    result = CliRunner().invoke(main, ["judge-evaluate", "--batch", "rows.jsonl", "--out", "scores.jsonl"])
    if corruption in BATCH_SKIPS:
        assert result.exit_code == 0, result.output
        assert f"rows.jsonl:{line}: " in result.output and "(skipped)" in result.output
        (error,) = [json.loads(text) for text in (tmp_path / "scores.errors.jsonl").read_text().splitlines()]
        assert error["line"] == line and error["fix"]
        assert "1 unreadable row(s)" in result.output
    else:
        assert result.exit_code == 1, result.output
        assert_clear(result.output, "rows.jsonl", line)
        assert (tmp_path / "scores.jsonl").read_bytes() == last_good


def ratings(n: int = 6) -> tuple[str, str]:
    human = [
        {"item": f"i{k}", "metric": "coherence", "ratings": [1 + k % 5, 1 + (k + 1) % 5]} for k in range(n)
    ]
    scores = [
        {
            "item": f"i{k}",
            "group": f"g{k % 2}",
            "system": f"s{k % 3}",
            "metric": "coherence",
            "score": 1 + k % 5,
        }
        for k in range(n)
    ]
    return "".join(json.dumps(h) + "\n" for h in human), "".join(json.dumps(s) + "\n" for s in scores)


@pytest.mark.parametrize("corruption", CORRUPTIONS)
def test_broken_human_ratings_are_refused_naming_file_line_and_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, corruption: str
) -> None:
    monkeypatch.chdir(tmp_path)
    human, scores = ratings()
    (tmp_path / "human.jsonl").write_text(human)
    (tmp_path / "scores.jsonl").write_text(scores)
    line = corrupt(tmp_path / "human.jsonl", KINDS["rag-rows"], corruption, monkeypatch)
    args = ["calibrate", "--scores", "scores.jsonl", "--human", "human.jsonl", "--resamples", "10"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)
    assert_clear(result.output, "human.jsonl", line)


# A recording no dvc.lock pins (judge-evaluate's, a collaborator's before `cache merge`) is read
# line by line: every broken line is named. An empty file is a recording of no call; the same call
# twice is one call (two copies of one recording merged), kept once: both documented, counted.
UNPINNED_LINE = {"truncated": -1, "non-utf8": 2, "oversized": None, "wrong-type": 2}


@pytest.mark.parametrize("corruption", CORRUPTIONS)
def test_a_broken_unpinned_recording_is_named_by_file_and_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, corruption: str
) -> None:
    monkeypatch.chdir(tmp_path)
    llm = {"backend": "bad-input-fake", "model": "m"}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"llm": llm, "cache": {"dir": "cache"}}))
    shutil.copy(ROOT / "data/rag-demo/rows.jsonl", tmp_path / "rows.jsonl")
    batch = ["judge-evaluate", "--batch", "rows.jsonl", "--out", "scores.jsonl"]
    assert CliRunner().invoke(main, batch).exit_code == 0
    recording = tmp_path / "recordings" / "judge_evaluate" / "calls.jsonl"
    if corruption == "oversized":
        monkeypatch.setattr(line_checks, "MAX_RECORDING_BYTES", recording.stat().st_size - 1)
    expected = (
        corrupt(recording, KINDS["rag-rows"], corruption, monkeypatch) if corruption != "oversized" else None
    )
    shutil.rmtree(tmp_path / "cache")  # so that the recording is read
    result = CliRunner().invoke(main, batch)
    if corruption in ("empty", "duplicate-id"):
        assert result.exit_code == 0, result.output
        assert len(recording.read_text().splitlines()) >= 8  # rewritten whole, each call once
        return
    assert result.exit_code == 1, result.output
    line = UNPINNED_LINE[corruption]
    assert_clear(result.output, "recordings/judge_evaluate/calls.jsonl", expected if line == -1 else line)
