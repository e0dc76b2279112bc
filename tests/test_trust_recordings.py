"""Faults and attacks on the recordings: runs that would erase each other, names that would lead out
of their folder, writers killed mid-write, many writers at once, one damaged stage among many."""

from __future__ import annotations

import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from pipeline.errors import CorruptRecordError, UnsafeNameError
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.files import atomic_write
from pipeline.llm.recordings import stage_reader, stage_writer
from pipeline.llm.recordings.index import RecordingIndex
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.types import CallContext
from pipeline.testing.fake_ollama import FakeOllama
from pipeline.testing.structured_responder import structured_ollama_responder
from pipeline.tools.cli import main
from tests.conftest import ROOT
from tests.helpers import request
from tests.project import MODEL, recorded_project, run_pipeline, scripted, write_params

FORK = multiprocessing.get_context("fork")


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def make_calls(version: int, n: int = 6, stage: str = "judge") -> list[RecordedCall]:
    """n calls whose prompts share a transcript of their own version (so each version's blobs differ)."""
    fake = FakeBackend()
    transcript = "\n".join(
        f"Participant: version {version}, line {i}, about sleep and mood" for i in range(300)
    )
    calls = []
    for i in range(n):
        req = request(f"Judge metric {i}.\n{transcript}\nAssessment {i} of version {version}")
        record = CallRecord.new(fake.identity(), req, fake.chat(req))
        calls.append(RecordedCall(context=CallContext(stage=stage, item=f"{900 + i}"), record=record))
    return calls


def keys_of(calls: list[RecordedCall]) -> set[str]:
    return {c.record.key for c in calls}


# -- two batches into one stage ----------------------------------------------------------------------


@pytest.fixture
def batches(tmp_path: Path) -> Iterator[tuple[Path, FakeOllama]]:
    rows = (ROOT / "data" / "rag-demo" / "rows.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "a.jsonl").write_text("".join(rows[:4]))
    (tmp_path / "b.jsonl").write_text("".join(rows[4:8]))
    with FakeOllama(responder=structured_ollama_responder, parallel_slots=2, latency_s=0.05) as server:
        llm = {"backend": "ollama", "base_url": server.url, "model": "test-model", "parallelism": 2}
        (tmp_path / "params.yaml").write_text(yaml.safe_dump({"llm": llm, "cache": {"dir": "cache"}}))
        yield tmp_path, server


def judge_batches(root: Path, names: tuple[str, ...], *, at_once: bool, mode: str = "auto") -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JUDGELOOP_CACHE_MODE": mode}
    cli = [sys.executable, "-m", "pipeline.tools.cli", "judge-evaluate", "--stage", "batches"]
    commands = [[*cli, "--batch", f"{name}.jsonl", "--out", f"{name}-{mode}.scores.jsonl"] for name in names]
    if at_once:
        running = [
            subprocess.Popen(c, cwd=root, env=env, stderr=subprocess.PIPE, text=True) for c in commands
        ]
        results = [(p.wait(timeout=300), p.stderr.read() if p.stderr else "") for p in running]
    else:
        done = [
            subprocess.run(c, cwd=root, env=env, stderr=subprocess.PIPE, text=True, timeout=300)
            for c in commands
        ]
        results = [(p.returncode, p.stderr) for p in done]
    for code, err in results:
        assert code == 0, err


def recorded_items(root: Path) -> list[str]:
    return sorted({c.call.context.item for c in stage_reader.read_stage(root / "recordings" / "batches")})


@pytest.mark.parametrize("at_once", [False, True], ids=["one-after-the-other", "at-once"])
def test_two_batches_into_one_stage_both_keep_every_call_through_gc_and_replay(
    batches: tuple[Path, FakeOllama], at_once: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, server = batches
    judge_batches(root, ("a", "b"), at_once=at_once)
    assert recorded_items(root) == ["d01", "d02", "d03", "d04", "d05", "d06", "d07", "d08"]
    made = server.requests_to("/api/chat")
    assert made == 8

    monkeypatch.chdir(root)
    code, out = cli("cache", "gc")
    assert code == 0 and "deleted 0 of 8 local entries" in out, out

    # A collaborator's clone: no local cache, only the recordings; both batches replay, no call made.
    shutil.rmtree(root / "cache")
    judge_batches(root, ("a", "b"), at_once=at_once, mode="replay")
    for name in ("a", "b"):
        assert (root / f"{name}-replay.scores.jsonl").read_bytes() == (
            root / f"{name}-auto.scores.jsonl"
        ).read_bytes()
    assert server.requests_to("/api/chat") == made
    assert recorded_items(root) == ["d01", "d02", "d03", "d04", "d05", "d06", "d07", "d08"]


def test_twelve_processes_adding_to_one_stage_lose_no_call(tmp_path: Path) -> None:
    stage = tmp_path / "recordings" / "judge_evaluate"
    runs = [make_calls(version, n=3) for version in range(12)]

    def add(calls: list[RecordedCall]) -> None:
        for call in calls:  # one write per call: many turns at the folder's lock
            stage_writer.write_stage(stage, [call], keep=lambda _: True)

    workers = [FORK.Process(target=add, args=(calls,)) for calls in runs]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert [w.exitcode for w in workers] == [0] * 12
    assert {c.call.record.key for c in stage_reader.read_stage(stage)} == set().union(*map(keys_of, runs))


# -- names that become paths -------------------------------------------------------------------------


def test_a_stage_name_from_the_command_line_cannot_lead_out(
    batches: tuple[Path, FakeOllama], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, server = batches
    monkeypatch.chdir(root / "..")
    outside = sorted(p.name for p in Path(".").iterdir())
    monkeypatch.chdir(root)
    for stage in ("../..", "..", "a/b", ".hidden", "x" * 101):
        code, out = cli("judge-evaluate", "--batch", "a.jsonl", "--out", "s.jsonl", "--stage", stage)
        assert code == 2 and "is not a plain name" in out, out
    code, out = cli("cache", "export", "exported", "--stage", "../judge")
    assert code == 2 and "is not a plain name" in out
    assert server.requests_to("/api/chat") == 0
    monkeypatch.chdir(root / "..")
    assert sorted(p.name for p in Path(".").iterdir()) == outside


def test_a_stage_name_from_a_merged_recording_cannot_lead_export_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours = tmp_path / "work" / "ours"
    ours.mkdir(parents=True)
    monkeypatch.chdir(ours)
    recorded_project(ours)
    # Their recording: valid calls (a context is not in a record's checksum) whose stage says "../..".
    theirs = tmp_path / "work" / "theirs" / "judge"
    escaping = [
        RecordedCall(context=CallContext(stage="../../escaped", item="1"), record=c.record)
        for c in make_calls(7)
    ]
    stage_writer.write_stage(theirs, escaping)
    code, out = cli("cache", "merge", str(theirs.parent), "--ours")
    assert code == 0, out
    code, out = cli("cache", "seed")  # the local cache holds their calls too, as if made here
    assert code == 0, out
    code, out = cli("cache", "export", "exported")
    assert code == 1 and "stage '../../escaped' is not a plain name" in out
    assert not (tmp_path / "escaped").exists() and not (ours / "exported").exists()

    # A stage folder that is a link out of their recordings is refused too.
    elsewhere = tmp_path / "elsewhere" / "calls"
    stage_writer.write_stage(elsewhere, make_calls(8))
    (theirs.parent / "linked").symlink_to(elsewhere)
    code, out = cli("cache", "merge", str(theirs.parent), "--ours")
    assert code == 1 and "leads outside" in out
    assert not (ours / "recordings" / "linked").exists()


def test_a_run_summary_naming_another_stage_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    recorded_project(tmp_path)
    summary = tmp_path / ".judgeloop" / "runs" / "judge.json"
    summary.write_text(summary.read_text().replace('"stage": "judge"', '"stage": "../../escaped"'))
    code, out = cli("cache", "export", "exported")
    assert code == 1 and "names stage '../../escaped', not 'judge'" in out
    assert not (tmp_path / "escaped").exists()


def test_a_session_refuses_a_stage_name_that_is_not_a_plain_name(tmp_path: Path) -> None:
    params = write_params(tmp_path)
    from pipeline.llm.session import open_session

    with pytest.raises(UnsafeNameError, match=r"stage '\.\./x' is not a plain name"):
        open_session(params, "../x", root=tmp_path)


# -- writers killed mid-write, many writers at once, one damaged stage --------------------------------


def _write_forever(directory: Path, versions: list[list[RecordedCall]]) -> None:
    built = []
    for calls in versions:  # the lines made first, as a stage makes them while it runs
        recording = stage_writer.StageRecording()
        for call in calls:
            recording.add(call)
        built.append(recording)
    n = 0
    while True:
        built[n % len(built)].write(directory)
        n += 1


def test_fifty_kills_mid_write_leave_every_stage_whole(tmp_path: Path) -> None:
    root = tmp_path / "recordings"
    versions = [make_calls(version, n=40) for version in range(3)]
    other = make_calls(9, n=5, stage="refine")
    stage_writer.write_stage(root / "refine", other)
    rng = random.Random(20)
    outcomes: dict[str, int] = {}
    for _ in range(50):
        writer = FORK.Process(target=_write_forever, args=(root / "judge", versions))
        writer.start()
        time.sleep(rng.uniform(0.01, 0.15))
        os.kill(writer.pid or 0, signal.SIGKILL)
        writer.join()
        # Every stage replays, whole: the one being written is one of the versions, never a mix.
        index = RecordingIndex(root)
        judged = index.stage("judge")
        assert judged.damage is None, judged.damage
        found = set(judged.by_key)
        assert found == set() or found in [keys_of(v) for v in versions]
        assert set(index.stage("refine").by_key) == keys_of(other)
        left = list((root / "judge").glob("*.tmp")) if (root / "judge").is_dir() else []
        assert len(left) <= 1  # a writer clears what a killed one left, under the folder's lock
        outcome = "killed mid-write" if left else "killed between writes"
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert sum(outcomes.values()) == 50
    print(f"50 SIGKILLs: {outcomes}")


def _replace_many(path: Path, writer: int) -> None:
    for n in range(30):
        atomic_write(path, f"writer {writer} write {n}\n" * 2000)


def test_twelve_concurrent_writers_of_one_file_all_succeed(tmp_path: Path) -> None:
    path = tmp_path / "outputs" / "judgements.jsonl"
    workers = [FORK.Process(target=_replace_many, args=(path, n)) for n in range(12)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert [w.exitcode for w in workers] == [0] * 12  # before: FileNotFoundError on a shared *.tmp
    lines = set(path.read_text().splitlines())
    assert len(lines) == 1 and next(iter(lines)).startswith("writer ")  # one whole write, not a mix
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left


def test_one_damaged_stage_fails_alone_naming_its_file_and_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    recorded_project(tmp_path)
    before = {p.name: p.read_bytes() for p in (tmp_path / "outputs" / "paper").iterdir()}
    path = tmp_path / "recordings" / "assess" / "calls.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    lines[1] = lines[1][: len(lines[1]) // 2] + "\n"  # a line cut in half
    path.write_text("".join(lines))
    shutil.rmtree(tmp_path / ".judgeloop")  # a fresh clone: the recordings are all there is
    write_params(tmp_path, cache={"mode": "replay"})
    fake = FakeBackend(scripted, name=MODEL)
    run_pipeline(tmp_path, fake, stages=("judge", "refine"))  # the other stages replay
    after = {p.name: p.read_bytes() for p in (tmp_path / "outputs" / "paper").iterdir()}
    assert after == before and fake.calls == []
    with pytest.raises(CorruptRecordError) as failed:
        run_pipeline(tmp_path, fake, stages=("assess",))
    message = failed.value.message
    assert "the recording of stage 'assess' cannot be used" in message
    assert f"{Path('recordings') / 'assess' / 'calls.jsonl'}:2: not a recorded call" in message
    assert "stage=assess item=" in message and fake.calls == []
