"""Fuzzing what `judgeloop batch ingest` reads of an export besides the results file (which
tests/fuzz/test_fuzz_records.py fuzzes): its manifest.jsonl and requests.jsonl, each edited, the
manifest forged (a request changed and its custom_id made its key again, as whoever can write the
folder could), either file replaced by a folder or a link; with the job's real answers as the
results. The property of tests/fuzz/support.py, and: whatever ingest stores in the local cache is
a record that verifies, stored under its own key, for a request the manifest exported."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from pipeline.experiments.params import load_params
from pipeline.llm.cache.store import CallStore
from pipeline.llm.keys import request_key
from pipeline.llm.records import CallRecord
from pipeline.llm.types import ChatRequest, ModelIdentity
from pipeline.testing.fake_batch import answer
from pipeline.testing.fake_openai import FakeOpenAI
from pipeline.testing.judge_responder import experiment_responder
from pipeline.tools.batch.exchange import batch_identity, ingest
from pipeline.tools.batch.manifest import MANIFEST_FILE, REQUESTS_FILE
from tests.fuzz.batch_export import export_two_calls
from tests.fuzz.support import clear_or_correct, fuzz, inputs, mixed_texts, only_inside


class Export:
    """The pristine export (its files' bytes), the job's answers to it, and where they lie."""

    def __init__(self, folder: Path, results: bytes) -> None:
        self.folder = folder
        self.files = {path.name: path.read_bytes() for path in folder.iterdir()}
        self.results = results

    def __repr__(self) -> str:  # a failing example names its changes, not the export's bytes
        return f"<the export of {len(self.files[MANIFEST_FILE].splitlines())} calls>"


@pytest.fixture(scope="module")
def exported(sandbox: Path) -> Export:
    """An export of the default experiment's first two calls (as tests/test_batch.py makes it),
    and the fake job's answers."""
    folder = export_two_calls(sandbox, "pristine")
    server = FakeOpenAI(responder=experiment_responder, max_model_len=65536)
    lines = [orjson.loads(line) for line in (folder / REQUESTS_FILE).read_bytes().splitlines()]
    results = b"".join(orjson.dumps(answer(server, line, n)) + b"\n" for n, line in enumerate(lines, 1))
    return Export(folder, results)


def _forged(manifest: bytes, line: int, text: str) -> bytes:
    """The manifest with one request's last message changed and its custom_id made its key again."""
    lines = manifest.split(b"\n")
    at = line % len(lines)
    entry = orjson.loads(lines[at])
    entry["request"]["messages"][-1]["content"] = text
    model = ModelIdentity.model_validate(entry["model"])
    entry["custom_id"] = request_key(model, ChatRequest.model_validate(entry["request"]))
    lines[at] = orjson.dumps(entry)
    return b"\n".join(lines)


@st.composite
def attacks(draw: st.DrawFn, pristine: Export) -> list[tuple[str, str, Any]]:
    """One or two changes to the export: (what, which file, the new bytes or None)."""
    chosen: list[tuple[str, str, Any]] = []
    for _ in range(draw(st.integers(1, 2))):
        name = draw(st.sampled_from([MANIFEST_FILE, REQUESTS_FILE]))
        how = draw(st.sampled_from(["edit", "edit", "forge", "folder", "link", "remove"]))
        if how == "edit":
            chosen.append((how, name, draw(inputs(pristine.files[name]))))
        elif how == "forge":
            text = draw(mixed_texts)
            chosen.append((how, MANIFEST_FILE, (draw(st.integers(0, 9)), text)))
        else:
            chosen.append((how, name, None))
    return chosen


def _attack(folder: Path, outside: Path, how: str, name: str, what: Any) -> None:
    path = folder / name
    if how == "edit":
        path.write_bytes(what)
    elif how == "forge":
        try:
            path.write_bytes(_forged(path.read_bytes(), *what))
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            event("forge: the manifest no longer held a request to forge")
    elif how == "folder":
        path.unlink(missing_ok=True)
        path.mkdir()
    elif how == "link":  # the same bytes, through a link to a copy outside the folder
        (outside / name).write_bytes(path.read_bytes() if path.is_file() else b"")
        path.unlink(missing_ok=True)
        path.symlink_to(outside / name)
    else:
        path.unlink(missing_ok=True)


def _exported_keys(pristine: Export, identity: ModelIdentity) -> set[str]:
    keys = set()
    for line in pristine.files[MANIFEST_FILE].splitlines():
        entry = orjson.loads(line)
        keys.add(request_key(identity, ChatRequest.model_validate(entry["request"])))
    return keys


@fuzz
@given(data=st.data())
def test_an_export_s_manifest_and_requests(sandbox: Path, exported: Export, data: st.DataObject) -> None:
    folder, outside = sandbox / "batch", sandbox / "outside"
    for path in (folder, outside, sandbox / ".judgeloop"):
        shutil.rmtree(path, ignore_errors=True)
    outside.mkdir()
    shutil.copytree(exported.folder, folder)
    for how, name, what in data.draw(attacks(exported)):
        event(f"{how} {name}")
        if folder.is_dir() and not (folder / name).is_dir():
            _attack(folder, outside, how, name, what)
    results = sandbox / "results.jsonl"
    results.write_bytes(exported.results)
    params = load_params(sandbox / "params.yaml")
    outcome = clear_or_correct(lambda: ingest(params, results, folder))
    event(f"ingest: {type(outcome).__name__}")
    identity = batch_identity(params)
    store = CallStore(Path(params.cache.dir))
    try:
        stored = [(key, store.get(key)) for key in store.keys()]  # noqa: SIM118 (a method, not a dict)
    finally:
        store.close()
    exported_keys = _exported_keys(exported, identity)
    for key, record in stored:
        assert isinstance(record, CallRecord) and record.problem() is None and record.key == key
        assert key in exported_keys, "stored a reply for a request the export did not hold"
    only_inside(sandbox.parent, sandbox)


def test_the_untouched_export_is_ingested(sandbox: Path, exported: Export) -> None:
    """The seed: the export as written, with the job's answers, stores every call (else the
    fuzzing would stop at its first check)."""
    folder = sandbox / "untouched"
    shutil.copytree(exported.folder, folder)
    results = sandbox / "untouched-results.jsonl"
    results.write_bytes(exported.results)
    params = load_params(sandbox / "params.yaml")
    outcome = ingest(params, results, folder)
    assert outcome.stored + outcome.known == len(exported.files[MANIFEST_FILE].splitlines()) > 0
    assert not outcome.refused and not outcome.errors
