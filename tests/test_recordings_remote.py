"""cache.recordings_store: dvc — the recordings travel through a DVC remote, not git (issue 33).

Real DVC in a temporary git repository: the paper's chain recorded on the fake backend, `dvc push`
to a remote, a fresh `git clone` that holds only the hashes (and says so, naming `dvc pull`, when
asked to replay), `dvc pull`, then a replay from the pulled recordings: byte-identical, git status
clean. The remote is a local folder, and, when moto's server and dvc-s3 are installed, an
S3-compatible server on loopback.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from pipeline.experiments.registry import load_design
from pipeline.llm.recordings.store import absent, absent_message
from pipeline.tools.dvc_yaml import recordings_store, stage_entry
from tests.conftest import ROOT

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}
CHAIN = "aggregate"  # the paper's design: assess, judge, refine, aggregate
COMPARED = (
    "outputs/paper/assessments.jsonl",
    "outputs/paper/judgements.jsonl",
    "outputs/paper/refinement.jsonl",
    "outputs/paper/metrics.json",
    "outputs/paper/report.html",
    "recordings/assess/calls.jsonl",
    "recordings/judge/calls.jsonl",
    "recordings/refine/calls.jsonl",
    "dvc.lock",
)


def _run(args: list[str], cwd: Path, check: bool = True, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **GIT_IDENTITY, **env}
    full_env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{full_env['PATH']}"
    result = subprocess.run(args, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=300)
    if check:
        assert result.returncode == 0, f"{args} failed:\n{result.stdout}\n{result.stderr}"
    return result


def _dvc(cwd: Path, *args: str, check: bool = True, **env: str) -> subprocess.CompletedProcess[str]:
    return _run([sys.executable, "-m", "dvc", *args], cwd, check, **env)


def _judgeloop(cwd: Path, *args: str, check: bool = True, **env: str) -> subprocess.CompletedProcess[str]:
    return _run([sys.executable, "-m", "pipeline.tools.cli", *args], cwd, check, **env)


def as_dvc_store(dvc_yaml: str) -> str:
    """The committed dvc.yaml with every recordings out cached, as `judgeloop dvc-yaml` writes it
    for cache.recordings_store: dvc (test_the_generator_caches_recordings_with_dvc checks that)."""
    return re.sub(r"(- recordings/[\w.-]+:\n\s+cache: )false", r"\g<1>true", dvc_yaml)


def test_the_generator_caches_recordings_with_dvc_and_not_with_git() -> None:
    design = load_design("paper")
    judge = next(s for s in design.stages if s.name == "judge")
    by_store = {store: stage_entry(design, judge, ROOT, store) for store in ("git", "dvc")}
    for store, entry in by_store.items():
        outs = {path: flags for out in entry["outs"] for path, flags in out.items()}
        assert outs["recordings/judge"]["cache"] is (store == "dvc")
        assert [flags["cache"] for path, flags in outs.items() if path != "recordings/judge"] == [False]
    committed = (ROOT / "dvc.yaml").read_text(encoding="utf-8")
    assert "cache: true" not in committed  # the demos keep git
    recording_outs = len(re.findall(r"- recordings/[\w.-]+:\n\s+cache: false", committed))
    assert recording_outs >= 10
    assert as_dvc_store(committed).count("cache: true") == recording_outs
    assert recordings_store({}, Path("params.yaml")) == "git"
    assert recordings_store({"cache": {"recordings_store": "dvc"}}, Path("params.yaml")) == "dvc"
    with pytest.raises(Exception, match=r"cache\.recordings_store is .svn."):
        recordings_store({"cache": {"recordings_store": "svn"}}, Path("params.yaml"))


def test_absent_recordings_are_named_with_the_command_that_brings_them(tmp_path: Path) -> None:
    lock = {
        "schema": "2.0",
        "stages": {
            "judge": {
                "cmd": "python -m stages paper judge",
                "outs": [
                    {"path": "outputs/paper/judgements.jsonl", "md5": "a" * 32},
                    {"path": "recordings/judge", "md5": "b" * 32 + ".dir"},
                ],
            },
            "elsewhere": {"outs": [{"path": "data/folder", "md5": "c" * 32 + ".dir"}]},
        },
    }
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(lock), encoding="utf-8")
    missing = absent(tmp_path, tmp_path / "recordings")
    assert [(m.dvc_stage, m.path) for m in missing] == [("judge", "recordings/judge")]
    assert "`dvc pull judge`" in absent_message(missing, "dvc")
    assert "git checkout -- recordings/judge" in absent_message(missing, "git")
    (tmp_path / "recordings" / "judge").mkdir(parents=True)
    (tmp_path / "recordings" / "judge" / "calls.jsonl").write_text("", encoding="utf-8")
    assert absent(tmp_path, tmp_path / "recordings") == []


def _project(root: Path, remote_url: str, remote_options: dict[str, str]) -> Path:
    project = root / "project"
    project.mkdir()
    for name in ("pipeline", "stages", "data"):
        shutil.copytree(ROOT / name, project / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in (".dvcignore", ".gitignore"):
        shutil.copy(ROOT / name, project / name)
    (project / "dvc.yaml").write_text(as_dvc_store((ROOT / "dvc.yaml").read_text()), encoding="utf-8")
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["llm"].update(backend="fake", model="fake-model")
    params["cache"]["recordings_store"] = "dvc"
    params["data"]["limit"] = 2
    params["refine"]["max_iterations"] = 2
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    _run(["git", "init", "-q"], project)
    _dvc(project, "init", "-q")
    _dvc(project, "remote", "add", "-d", "shared", remote_url)
    for option, value in remote_options.items():
        _dvc(project, "remote", "modify", "shared", option, value)
    return project


def _round_trip(tmp_path: Path, remote_url: str, remote_options: dict[str, str] | None = None) -> None:
    project = _project(tmp_path, remote_url, remote_options or {})
    _judgeloop(project, "repro", CHAIN)
    recorded = {name: (project / name).read_bytes() for name in COMPARED}
    _run(["git", "add", "-A"], project)
    _run(["git", "commit", "-qm", "recorded, recordings in DVC"], project)
    tracked = _run(["git", "ls-files", "recordings"], project).stdout.split()
    assert tracked == ["recordings/.gitignore"]  # git holds the hashes (dvc.lock), DVC the files
    pushed = _dvc(project, "push")
    assert re.search(r"\d+ files? pushed", pushed.stdout), pushed.stdout

    clone = tmp_path / "clone"
    _run(["git", "clone", "-q", str(project), str(clone)], tmp_path)
    assert not (clone / "recordings" / "judge").exists()
    refused = _judgeloop(clone, "repro", "--replay", CHAIN, check=False)
    assert refused.returncode != 0
    said = " ".join((refused.stdout + refused.stderr).split())
    assert "recordings/assess: pinned in dvc.lock but not here" in said
    assert "`dvc pull` brings them" in said
    _run(["git", "checkout", "--", "."], clone)  # whatever the refused run touched

    _dvc(clone, "pull", "--with-deps", CHAIN)  # the chain this test ran (`dvc pull`: every stage)
    replay = _judgeloop(clone, "repro", "--replay", CHAIN)
    assert "0 misses sent to the model (cache mode replay)" in replay.stderr
    assert {name: (clone / name).read_bytes() for name in COMPARED} == recorded
    assert _run(["git", "status", "--porcelain"], clone).stdout == ""


@pytest.mark.slow
def test_a_fresh_clone_pulls_the_recordings_from_a_folder_remote_and_replays_byte_identically(
    tmp_path: Path,
) -> None:
    _round_trip(tmp_path, str(tmp_path / "remote"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def s3_server() -> Iterator[str]:
    """moto's S3-compatible server on loopback, with a bucket; its endpoint URL."""
    pytest.importorskip("dvc_s3", reason="dvc-s3 (DVC's S3 remotes) is not installed: pip install dvc-s3")
    pytest.importorskip("moto.server", reason="moto's server is not installed: pip install 'moto[server]'")
    boto3 = pytest.importorskip("boto3")
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="test",
            aws_secret_access_key="test",
            region_name="us-east-1",
        )
        for _ in range(100):
            try:
                client.create_bucket(Bucket="recordings")
                break
            except Exception:
                time.sleep(0.1)
        else:
            pytest.fail("moto's S3 server did not start")
        yield endpoint
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.slow
def test_the_same_round_trip_through_an_s3_compatible_server(
    tmp_path: Path, s3_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    _round_trip(tmp_path, "s3://recordings/experiment", {"endpointurl": s3_server})


def test_a_stage_whose_pinned_recording_is_not_here_says_dvc_pull(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipeline.errors import ConfigError
    from pipeline.llm.settings import EngineSettings
    from pipeline.llm.stage import check_recordings_here

    lock = {"stages": {"judge": {"outs": [{"path": "recordings/judge", "md5": "b" * 32 + ".dir"}]}}}
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(lock), encoding="utf-8")
    replay = EngineSettings.model_validate({"cache": {"mode": "replay", "recordings_store": "dvc"}})
    with pytest.raises(ConfigError, match=r"replay mode: recordings/judge: pinned in dvc\.lock but not here"):
        check_recordings_here(replay, "judge", tmp_path)
    check_recordings_here(replay, "assess", tmp_path)  # not pinned: a stage's first run
    auto = EngineSettings.model_validate({"cache": {"recordings_store": "dvc"}})
    check_recordings_here(auto, "judge", tmp_path)  # goes on, saying so
    assert "`dvc pull judge`" in capsys.readouterr().err
