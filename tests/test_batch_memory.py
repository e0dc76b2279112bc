"""Batch ingest's memory at scale (issue 33 item 4): what ingest holds per call besides the
manifest's own index is a few bytes in flat arrays, not sets and dicts of keys, so a million
calls stay far below 2 GB; and the results file is read a line at a time, never whole.

The bounds are on traced bytes (tracemalloc) against the number of calls, never on time."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from pipeline.experiments.params import load_params
from pipeline.llm.backends.openai_compat import OpenAICompatBackend
from pipeline.llm.files import open_regular
from pipeline.llm.keys import request_key
from pipeline.llm.records import CallRecord
from pipeline.llm.types import ChatRequest, Message, ModelIdentity, Options
from pipeline.testing.fake_batch import answer
from pipeline.testing.fake_openai import FakeOpenAI, default_responder
from pipeline.tools.batch.exchange import _Ingest
from pipeline.tools.batch.manifest import (
    BATCH_URL,
    MANIFEST_FILE,
    REQUESTS_FILE,
    Manifest,
    exported_intact,
    objects,
)
from tests.conftest import ROOT

CALLS = 8000
MODEL, DIGEST = "test-model", "rev-1"
# Per call, besides the manifest: a 16-byte answer digest and two flags (the arrays are made before
# the measure starts, so what is traced is what grows as lines are read). Before: a dict of
# key -> digest and a set of keys done, about 300 bytes a call; and a set of keys seen in
# requests.jsonl, about 150.
PER_CALL_BYTES = 24
FIXED_BYTES = 256 << 10


class _NoStore:
    """A cache that keeps nothing: the test measures ingest's own holdings, not the cache's. Each
    record counts as stored (a write says how many it stored: CallStore.seed)."""

    def seed(self, record: CallRecord) -> int:
        return 1


@pytest.fixture
def big_export(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """An export of CALLS short calls in export's format, and the fake batch runner's answers."""
    monkeypatch.chdir(tmp_path)
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    params["llm"].update(backend="openai", model=MODEL, digest=DIGEST, base_url="http://127.0.0.1:9")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    identity = ModelIdentity(backend="openai", name=MODEL, digest=DIGEST)
    backend = OpenAICompatBackend(load_params().llm)
    server = FakeOpenAI(models=(MODEL,), responder=default_responder, max_model_len=65536)
    folder = tmp_path / "batch"
    folder.mkdir()
    with (
        (folder / REQUESTS_FILE).open("wb") as requests,
        (folder / MANIFEST_FILE).open("wb") as manifest,
        (tmp_path / "results.jsonl").open("wb") as results,
    ):
        for i in range(CALLS):
            request = ChatRequest(messages=(Message(role="user", content=f"call {i}"),), options=Options())
            key = request_key(identity, request)
            line: dict[str, Any] = {"custom_id": key, "method": "POST", "url": BATCH_URL}
            line["body"] = backend.request_body(request)
            requests.write(orjson.dumps(line) + b"\n")
            exported = {"custom_id": key, "model": identity.model_dump(mode="json")}
            exported["request"] = request.model_dump(mode="json")
            manifest.write(orjson.dumps(exported) + b"\n")
            results.write(orjson.dumps(answer(server, line, i + 1)) + b"\n")
    backend.close()
    return folder, tmp_path / "results.jsonl"


def _ingested(folder: Path, results: Path) -> tuple[_Ingest, int]:
    """Both passes of ingest over `results` into a cache that keeps nothing; the bytes still
    traced at the end that were allocated after the manifest was opened."""
    with open_regular(results) as opened:  # as ingest opens it: once, for both passes
        reading = _Ingest(load_params(), folder, results, opened)
        tracemalloc.start()
        try:
            reading.first_pass()
            store: Any = _NoStore()
            for number, entry in objects(results, opened):
                reading.line(number, entry, store)
            held, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            reading.requests.close()
    return reading, held


def test_ingest_holds_a_few_bytes_a_call_besides_the_manifest(big_export: tuple[Path, Path]) -> None:
    folder, results = big_export
    _ingested(folder, results)  # once first: what is made once per process (imports, caches)
    reading, held = _ingested(folder, results)
    assert (reading.outcome.stored, reading.outcome.refused, reading.outcome.errors) == (CALLS, [], [])
    assert held <= FIXED_BYTES + PER_CALL_BYTES * CALLS, f"{held / CALLS:.0f} bytes a call held"


def test_checking_requests_jsonl_holds_a_byte_a_call(big_export: tuple[Path, Path]) -> None:
    folder, _ = big_export
    params = load_params()
    backend = OpenAICompatBackend(params.llm)
    identity = ModelIdentity(backend="openai", name=MODEL, digest=DIGEST)
    manifest = Manifest(folder, identity, backend.request_body)  # as ingest opens it
    backend.close()
    exported_intact(folder, manifest, params)  # once first: what is made once per process
    tracemalloc.start()
    try:
        problems = exported_intact(folder, manifest, params)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        manifest.close()
    assert problems == {}
    assert peak <= FIXED_BYTES + PER_CALL_BYTES * CALLS, f"{peak / CALLS:.0f} bytes a call at the peak"
