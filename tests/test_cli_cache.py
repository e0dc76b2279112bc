"""`judgeloop cache`: stats, verify (recordings AND the local store), gc, merge, seed, export."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.llm.backends.fake import FakeBackend
from pipeline.llm.cache.store import CallStore
from pipeline.llm.keys import KEY_PREFIX, recipe1_key
from pipeline.llm.recordings.stage_reader import read_all, read_stage
from pipeline.llm.recordings.stage_writer import write_stage
from pipeline.llm.records import CallRecord
from pipeline.llm.types import ChatReply
from pipeline.tools.cli import main
from tests.helpers import request
from tests.project import MODEL, TRANSCRIPTS, recorded_project, scripted

CACHE = Path(".judgeloop/cache")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    recorded_project(tmp_path)
    return tmp_path


def cache(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["cache", *args])
    return result.exit_code, result.stdout, result.stderr


def calls_in(root: Path) -> set[tuple[str, str]]:
    return {(lc.call.context.describe(), lc.call.record.key) for lc in read_all(root)}


def replies(root: Path, key: str) -> set[str]:
    return {lc.call.record.reply.text for lc in read_all(root) if lc.call.record.key == key}


def stray_record(text: str = "nobody asked for this") -> CallRecord:
    return CallRecord.new(FakeBackend(name=MODEL).identity(), request(text), ChatReply(text="a reply"))


def test_stats_counts_the_store_the_recordings_and_the_last_runs(project: Path) -> None:
    code, out, _ = cache("stats", "--json")
    assert code == 0
    stats = json.loads(out)
    assert stats["local"]["entries"] == 21
    assert stats["recordings"]["judge"] | {"bytes": 0} == {"calls": 12, "unique_keys": 12, "bytes": 0}
    assert stats["runs"]["refine"] == {"mode": "auto", "hits": 0, "model_calls": 6, "replay_misses": 0}
    code, text, _ = cache("stats")
    assert "21 entries" in text and "judge      12 calls, 12 unique keys" in text
    assert "refine     mode auto: 0 hits, 6 model calls" in text


def test_entries_under_an_older_key_recipe_are_counted_and_collected(project: Path) -> None:
    store = CallStore(CACHE)
    key = next(k for k in store.keys())  # noqa: SIM118 (a CallStore is not iterable)
    record = store.get(key)
    assert record is not None
    old = record.model_copy(update={"key": recipe1_key(record.model, record.request), "recipe": 1})
    old = old.model_copy(update={"checksum": old.expected_checksum()})
    store.put(old)
    store.close()
    _, out, _ = cache("stats", "--json")
    local = json.loads(out)["local"] | {"bytes": 0}
    assert local == {"entries": 22, "bytes": 0, "older_key_recipe": 1, "refused": 0}
    assert "1 of them under an older key recipe, never looked up again" in cache("stats")[1]
    assert cache("verify")[0] == 0  # an old record is not a corrupt one
    assert "deleted 1 of 22 local entries" in cache("gc")[1]
    assert json.loads(cache("stats", "--json")[1])["local"]["older_key_recipe"] == 0


def test_verify_passes_on_an_untouched_experiment(project: Path) -> None:
    code, out, _ = cache("verify")
    assert code == 0
    assert "checked 42 records (21 local, 21 recorded calls)" in out and "all records verify" in out


def test_verify_catches_a_reply_edited_by_hand_in_the_recordings(project: Path) -> None:
    path = Path("recordings/judge/calls.jsonl")
    lines = path.read_text().splitlines()
    number = next(i for i, line in enumerate(lines) if "Score: 4" in line)
    lines[number] = lines[number].replace("Score: 4", "Score: 5")
    path.write_text("\n".join(lines) + "\n")
    code, out, _ = cache("verify")
    assert code == 1
    assert f"recordings/judge/calls.jsonl:{number + 1}: stage=judge" in out
    assert "the checksum does not match (reply or metadata edited)" in out
    assert "1 problem(s)" in out


def test_verify_catches_an_edited_prompt_inside_a_shared_blob(project: Path) -> None:
    path = Path("recordings/judge/calls.jsonl")
    lines = path.read_text().splitlines(keepends=True)
    number = next(i for i, line in enumerate(lines) if line.startswith('{"blob":') and "COMPLETENESS" in line)
    lines[number] = lines[number].replace("COMPLETENESS", "C0MPLETENESS", 1)
    path.write_text("".join(lines))
    code, out, _ = cache("verify")
    assert code == 1
    assert "does not hash to its id (edited)" in out
    assert "the request does not hash to the key (request edited)" in out


def test_verify_catches_tampered_foreign_and_unreadable_local_entries(project: Path) -> None:
    store = CallStore(CACHE)
    # Whatever the store's byte layout, a judge's verdict edited in place:
    key = next(k for k in store.keys() if b"Score: 4" in (store.get_raw(k) or b""))  # noqa: SIM118
    store.put_raw(key, (store.get_raw(key) or b"").replace(b"Score: 4", b"Score: 1"))
    other = stray_record()
    store.put_raw(
        KEY_PREFIX + "0" * 32, other.model_dump_json().encode()
    )  # a valid record, under another key
    store.put_raw(KEY_PREFIX + "1" * 32, b"\x00 not json")
    store.close()
    code, out, _ = cache("verify")
    assert code == 1
    assert f"{key}: does not match its seal (reply or metadata damaged or edited)" in out
    assert f"foreign: stored under {KEY_PREFIX}{'0' * 32} but the record is for {other.key}" in out
    assert f"{KEY_PREFIX}{'1' * 32}: cannot be read" in out
    assert "judgeloop cache verify --repair" in out
    code, out, _ = cache("verify", "--delete-corrupt")  # the option's older name still works
    assert code == 0, out
    assert out.count("deleted local entry") == 3
    assert cache("verify")[0] == 0


def test_gc_drops_only_what_no_recording_references(project: Path) -> None:
    store = CallStore(CACHE)
    store.put(stray_record())
    store.close()
    code, out, _ = cache("gc", "--dry-run")
    assert code == 0 and re.search(r"would delete 1 of 22 local entries \([\d.]+[kMG]?B\)", out)
    assert len(CallStore(CACHE)) == 22
    code, out, _ = cache("gc")
    assert "deleted 1 of 22 local entries" in out and "kept 21 referenced" in out
    store = CallStore(CACHE)
    assert len(store) == 21 and stray_record().key not in store


def test_gc_keeps_the_calls_of_a_stage_whose_recording_was_not_written(project: Path) -> None:
    shutil.rmtree("recordings/refine")  # as if refine had failed: its run statistics still name its calls
    code, out, _ = cache("gc")
    assert code == 0 and "deleted 0 of 21" in out


def test_gc_refuses_when_a_recording_cannot_be_read(project: Path) -> None:
    Path("recordings/assess/calls.jsonl").write_text("{not json\n")
    code, _, err = cache("gc")
    assert code == 1 and "cannot be read" in err
    assert len(CallStore(CACHE)) == 21


@pytest.fixture
def collaborator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """Two recorded experiments: ours on 901-902, theirs on 902-903 with another judge on 902's coherence."""
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    ours.mkdir()
    theirs.mkdir()
    recorded_project(ours, items=("901", "902"))

    def their_model(req):  # the same requests; a different coherence verdict for 902
        reply = scripted(req)
        if "COHERENCE only" in req.messages[0].content and "grew up in ohio" in req.messages[0].content:
            return reply.replace("Score: 4", "Score: 3")
        return reply

    from tests.project import run_pipeline, write_data, write_params

    write_data(theirs, ("902", "903"))
    write_params(theirs)
    run_pipeline(theirs, FakeBackend(their_model, name=MODEL))
    monkeypatch.chdir(ours)
    return ours, theirs


def test_merge_keeps_every_call_and_reports_the_conflict(collaborator: tuple[Path, Path]) -> None:
    ours, theirs = collaborator
    before_ours, before_theirs = calls_in(ours / "recordings"), calls_in(theirs / "recordings")
    code, out, err = cache("merge", str(theirs / "recordings"))
    assert code == 1
    assert "1 conflicting call(s): kept ours" in err
    [conflict] = re.findall(r"conflict: key (jl\d+:\w+)", out)
    assert "ours:   stage=judge item=902 step=0 metric=coherence role=judge" in out
    assert "    -Score: 4\n    +Score: 3\n" in out
    merged = calls_in(ours / "recordings")
    # Theirs judged 902's coherence 3, so their refine loop differs too: every one of those calls is kept.
    assert merged == before_ours | before_theirs
    assert {c.split(" item=")[1].split()[0] for c, _ in merged} == set(TRANSCRIPTS)
    [kept] = replies(ours / "recordings", conflict)
    assert kept.endswith("Score: 4")


def test_merge_is_deterministic_and_can_take_theirs(collaborator: tuple[Path, Path]) -> None:
    ours, theirs = collaborator
    assert cache("merge", str(theirs / "recordings"), "--ours")[0] == 0
    first = {p: p.read_bytes() for p in (ours / "recordings").rglob("*.jsonl")}
    assert cache("merge", str(theirs / "recordings"), "--ours")[0] == 0
    assert {p: p.read_bytes() for p in (ours / "recordings").rglob("*.jsonl")} == first
    code, out, _ = cache("merge", str(theirs / "recordings"), "--theirs")
    assert code == 0 and "took theirs for 1 conflicting key(s)" in out
    [conflict] = re.findall(r"conflict: key (jl\d+:\w+)", out)
    [taken] = replies(ours / "recordings", conflict)
    assert taken.endswith("Score: 3")


def test_merge_takes_a_collaborators_recordings_made_under_an_older_key_recipe(
    collaborator: tuple[Path, Path],
) -> None:
    ours, theirs = collaborator
    current = calls_in(theirs / "recordings")
    for stage in (theirs / "recordings").iterdir():  # as judgeloop 0.1.0 wrote them
        calls = [lc.call for lc in read_stage(stage)]
        old = []
        for call in calls:
            record = call.record
            record = record.model_copy(update={"key": recipe1_key(record.model, record.request), "recipe": 1})
            old.append(
                replace(call, record=record.model_copy(update={"checksum": record.expected_checksum()}))
            )
        write_stage(stage, old)
    assert '"recipe":1' in (theirs / "recordings" / "judge" / "calls.jsonl").read_text()
    code, out, _ = cache("merge", str(theirs / "recordings"), "--ours")
    assert code == 0 and "1 conflicting" not in out and "conflict: key jl2:" in out  # 902's coherence
    assert calls_in(ours / "recordings") >= current  # their calls, under today's keys
    assert '"recipe":1' not in "".join(p.read_text() for p in (ours / "recordings").rglob("calls.jsonl"))


def test_merge_refuses_a_collaborators_edited_record(collaborator: tuple[Path, Path]) -> None:
    ours, theirs = collaborator
    path = theirs / "recordings/judge/calls.jsonl"
    path.write_text(path.read_text().replace("Score: 4", "Score: 5", 1))
    before = calls_in(ours / "recordings")
    code, _, err = cache("merge", str(theirs / "recordings"))
    assert code == 1 and "cannot be trusted" in err
    assert calls_in(ours / "recordings") == before


def test_seed_fills_an_empty_cache_from_the_recordings(project: Path) -> None:
    shutil.rmtree(CACHE)
    code, out, _ = cache("seed")
    assert code == 0 and "21 new, 0 already present" in out
    code, out, _ = cache("seed")
    assert "0 new, 21 already present" in out
    assert cache("verify")[0] == 0


def test_export_writes_the_local_store_as_recordings(project: Path) -> None:
    store = CallStore(CACHE)
    stray = stray_record()
    store.put(stray)
    store.close()
    code, out, _ = cache("export", "exported")
    assert code == 0, out
    assert "unrecorded: 1 calls" in out
    assert calls_in(Path("exported")) - calls_in(Path("recordings")) == {("stage=unrecorded", stray.key)}
    assert [lc.call.record for lc in read_stage(Path("exported/unrecorded"))] == [stray]
    code, out, _ = cache("export", "only-judge", "--stage", "judge")
    assert sorted(p.name for p in Path("only-judge").iterdir()) == ["judge"]
    assert cache("export", "recordings")[0] == 1


def test_export_refuses_two_stages_whose_folders_differ_only_in_case(project: Path) -> None:
    """A run summary (or a recording's context) naming stage JUDGE beside judge: on a file system
    that ignores case (macOS, Windows) both would be written to one folder, the second replacing the
    first's calls. Refused before anything is written, naming both (writers-red)."""
    store = CallStore(CACHE)
    stray = stray_record()
    store.put(stray)
    store.close()
    summary = {"stage": "JUDGE", "mode": "auto", "hits": 0, "model_calls": 1, "replay_misses": 0}
    (Path(".judgeloop/runs") / "JUDGE.json").write_text(json.dumps({**summary, "keys": {stray.key: "miss"}}))
    code, out, err = cache("export", "exported")
    assert code == 1, out
    assert "JUDGE" in err and "judge" in err and "differ only in case" in err, err
    assert not Path("exported").exists()
