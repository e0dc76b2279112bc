"""Attacks on the local call store, as a colleague's or a shared cache folder could carry them:
a planted pickle, planted settings, a value file outside the folder, a reply edited in place.
Each ends in a clear error naming the fix, with nothing executed and nothing served unverified."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import diskcache
import pytest
from click.testing import CliRunner

from pipeline.errors import CorruptRecordError
from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.cache.store import MAGIC, CallStore
from pipeline.llm.recordings.stage_reader import read_stage
from pipeline.llm.records import CallRecord
from pipeline.llm.types import ChatReply
from pipeline.tools.cli import main
from tests.helpers import request
from tests.project import MODEL, recorded_project, run_pipeline, scripted, write_params

CACHE = Path(".judgeloop/cache")


class Planted:
    """What an attacker pickles: unpickling it runs `touch MARKER`."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, (f"touch {self.marker}",)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    recorded_project(tmp_path)
    return tmp_path


def cache(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["cache", *args])
    return result.exit_code, result.output


def judge_key() -> str:
    """The key of a judge call (its reply says "Score: 4")."""
    store = CallStore(CACHE)
    try:
        return next(k for k in store.keys() if b"Score: 4" in (store.get_raw(k) or b""))  # noqa: SIM118
    finally:
        store.close()


def outputs(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / "outputs").glob("*.jsonl"))}


def test_a_planted_pickle_never_runs_in_stats_gc_verify_or_a_stage(project: Path) -> None:
    marker = project / "pwned"
    key = judge_key()
    # With diskcache's own Disk, as anyone's diskcache writes them: a pickled value under a key the
    # judge stage asks for, and a pickled key.
    planted = diskcache.Cache(str(CACHE))
    planted.set(key, Planted(marker))
    planted.set(("a", "tuple", "key"), b"x")
    planted.close()

    code, out = cache("stats")
    assert code == 0 and "1 of them with keys judgeloop never writes" in out and "--repair" in out
    code, out = cache("gc")
    assert code == 1 and "a pickled key" in out and "judgeloop cache verify --repair" in out

    fake = FakeBackend(scripted, name=MODEL)
    # The stage's own recording is served before the local cache: the planted entry is not read.
    run_pipeline(project, fake, stages=("judge",))
    assert fake.calls == [] and not marker.exists()
    # Without the recording, the stage reaches the local entry, and refuses it unread.
    shutil.move(project / "recordings" / "judge", project / "judge-recording")
    with pytest.raises(CorruptRecordError) as stopped:
        run_pipeline(project, fake, stages=("judge",))
    shutil.move(project / "judge-recording", project / "recordings" / "judge")
    message = stopped.value.message
    assert "stage=judge item=" in message and f"key {key}" in message
    assert "holds a pickle, which judgeloop never writes: refused, not read" in message
    assert str(CACHE / "cache.db") in message and "judgeloop cache verify --repair" in message
    assert fake.calls == []

    code, out = cache("verify")
    assert code == 1 and f"{key}: holds a pickle" in out and "a pickled key" in out
    code, out = cache("verify", "--repair")
    assert code == 0 and out.count("deleted local entry") == 2
    # Repaired: the dropped call is served again, from the stage's recording, verified.
    before = outputs(project)
    run_pipeline(project, fake, stages=("judge",))
    assert fake.calls == [] and outputs(project) == before
    assert not marker.exists()


def test_a_cache_database_with_settings_or_triggers_diskcache_never_writes_is_refused_unopened(
    project: Path,
) -> None:
    db = CACHE / "cache.db"
    with sqlite3.connect(db) as con:  # diskcache would run `PRAGMA evil = 1` from this row
        con.execute("INSERT INTO Settings VALUES ('sqlite_evil', 1)")
    with pytest.raises(CorruptRecordError, match=r"holds what diskcache never writes \(sqlite_evil\)"):
        CallStore(CACHE)
    assert cache("stats")[0] == 1
    with sqlite3.connect(db) as con:
        con.execute("DELETE FROM Settings WHERE key = 'sqlite_evil'")
        con.execute("CREATE TRIGGER wipe AFTER INSERT ON Cache BEGIN DELETE FROM Cache; END")
    with pytest.raises(CorruptRecordError, match=r"trigger wipe"):
        CallStore(CACHE)


def test_a_value_file_named_outside_the_cache_is_neither_read_nor_deleted(project: Path) -> None:
    secret = project / "secret.txt"
    secret.write_text("not the cache's to read or delete")
    key = judge_key()
    with sqlite3.connect(CACHE / "cache.db") as con:
        con.execute(
            "UPDATE Cache SET mode = 2, value = NULL, filename = ? WHERE key = ?", ("../../secret.txt", key)
        )
    store = CallStore(CACHE)
    with pytest.raises(CorruptRecordError, match=r"a value file named '../../secret.txt'.*refused"):
        store.get(key)
    store.close()
    code, out = cache("verify", "--repair")
    assert code == 0 and "deleted local entry" in out
    assert secret.read_text() == "not the cache's to read or delete"


def test_a_reply_edited_in_the_local_cache_is_never_served_nor_exported(project: Path) -> None:
    key = judge_key()
    store = CallStore(CACHE)
    raw = store.get_raw(key) or b""
    store.put_raw(key, raw.replace(b"Score: 4", b"Score: 1"))
    store.close()
    before = outputs(project)
    fake = FakeBackend(scripted, name=MODEL)
    # Both modes serve the stage's own recording first: without it, the stage reaches the cache.
    shutil.move(project / "recordings/judge", project / "judge-recording")
    for mode in ("auto", "replay"):
        write_params(project, cache={"mode": mode})
        with pytest.raises(CorruptRecordError) as stopped:
            run_pipeline(project, fake, stages=("judge",))
        message = stopped.value.message
        assert "stage=judge item=" in message and f"key {key}" in message and "metric=" in message
        assert "does not match its seal (reply or metadata damaged or edited)" in message
        assert "`judgeloop cache verify --repair`, which deletes the damaged entry" in message
    shutil.move(project / "judge-recording", project / "recordings/judge")
    assert fake.calls == [] and outputs(project) == before

    code, out = cache("export", "exported")
    assert code == 0 and "skipped 1 local entries that do not verify" in out
    exported = {c.call.record.key: c.call.record.reply.text for c in read_stage(Path("exported/judge"))}
    assert key not in exported and not any("Score: 1" in text for text in exported.values())

    assert cache("verify", "--repair")[0] == 0
    write_params(project, cache={"mode": "auto"})
    run_pipeline(project, fake, stages=("judge",))  # served from the recording, verified
    assert fake.calls == [] and outputs(project) == before


def test_an_entry_from_before_the_seal_is_verified_in_full_then_sealed(tmp_path: Path) -> None:
    fake = FakeBackend()
    record = CallRecord.new(fake.identity(), request("hello"), ChatReply(text="Score: 4"))
    old_layout = f"{record.model_dump_json(exclude={'request'})}\n{record.request.model_dump_json()}".encode()
    store = CallStore(tmp_path)
    store.put_raw(record.key, old_layout)
    assert store.get(record.key, record.request) == record
    assert (store.get_raw(record.key) or b"").startswith(MAGIC)  # sealed on that first read
    store.put_raw(record.key, old_layout.replace(b"Score: 4", b"Score: 5"))
    with pytest.raises(CorruptRecordError, match=r"cannot be trusted: the checksum does not match"):
        store.get(record.key, record.request)
    store.close()
