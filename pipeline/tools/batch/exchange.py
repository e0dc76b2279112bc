"""A batch's two files out, its results in: `judgeloop batch export` and `judgeloop batch ingest`.

Export writes, into a folder of its own (.judgeloop/batch/export by default):

    requests.jsonl   OpenAI Batch input, one call a line: {"custom_id": the cache key, "method":
                     "POST", "url": "/v1/chat/completions", "body": the exact request the openai
                     backend would send}; `vllm run-batch`, OpenAI-compatible batch APIs and Ray
                     Data read it
    manifest.jsonl   per call, the key, the model identity and the ChatRequest it was made from
                     (what a cache record holds, and what the body alone does not say: num_ctx)

Ingest reads a results file in OpenAI Batch output form ({"custom_id", "response": {"status_code",
"body"}, "error"}) and fills the local cache. The results file is untrusted input, and so are the
two exported files by the time it is read; a line is stored only when

- its custom_id is a key the manifest holds, once (an unknown id, or one given twice with two
  different answers, is refused);
- the manifest's line for it re-derives that key from its own request, under the identity this
  project's params give the model now (a manifest edited, or exported for other weights, is
  refused);
- requests.jsonl still holds, for that key, exactly the body that request makes (an input edited
  after the export would have had the job answer another question than the key's: refused);
- the response is a 200 whose body is a chat completion by the exported model, with a message's
  content (otherwise the job's error is reported and nothing is stored: the call is exported again
  in the next round).

The reply is read as the openai backend reads a live one (pipeline.llm.backends.openai_compat), so
a replay of ingested calls is a replay of the same calls made live. What the job did not time has
no duration: a latency budget (regen) then stops as `latency_unmeasured`, as it does on any reply
whose duration is unknown.

Batch rounds key the replies by llm.digest, which must be pinned: a batch job has no server to ask
which weights answer. The paths come from the command line; nothing in the files names a path.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import IO, Any

import orjson

from pipeline.data.json_keys import RepeatedKey
from pipeline.errors import BackendError, ConfigError
from pipeline.llm.backends.http_errors import body_error
from pipeline.llm.backends.openai_compat import OpenAICompatBackend, completion_reply
from pipeline.llm.cache.store import CallStore
from pipeline.llm.files import open_regular, replacing
from pipeline.llm.records import CallRecord
from pipeline.llm.settings import EngineSettings
from pipeline.llm.types import ModelIdentity
from pipeline.tools.batch.manifest import (
    BATCH_URL,
    MANIFEST_FILE,
    REQUESTS_FILE,
    Manifest,
    exported_intact,
    objects,
)
from pipeline.tools.status.command import predict
from pipeline.tools.status.planned import PlannedCall
from pipeline.tools.status.prediction import Prediction

DEFAULT_FOLDER = Path(".judgeloop/batch/export")


def batch_identity(params: EngineSettings) -> ModelIdentity:
    """The model's identity in a batch round's keys: the openai backend's, pinned by llm.digest."""
    llm = params.llm
    if llm.backend != "openai":
        raise ConfigError(
            f"batch rounds send OpenAI chat-completions requests, and llm.backend is {llm.backend!r}, whose "
            "keys a batch's replies would not match. Fix: set llm.backend: openai (and llm.model to the "
            "name the batch job serves)."
        )
    if not llm.digest:
        raise ConfigError(
            "batch rounds need llm.digest: a batch job has no server to ask which weights answer, and "
            "the cache keys every reply by them. Fix: pin llm.digest in params.yaml to the checkpoint's "
            "revision (e.g. its Hugging Face commit), the same for every round and every run."
        )
    return ModelIdentity(backend="openai", name=llm.model, digest=llm.digest)


class Planned:
    """The calls a prediction plans for the model, stage after stage (each stage's PlannedCalls, on
    disk): counted without reading them, read back a call at a time as they are iterated."""

    def __init__(self, prediction: Prediction) -> None:
        self.stages = [stage.probe.model_calls for stage in prediction.stages if stage.probe]

    def __len__(self) -> int:
        return sum(map(len, self.stages))

    def __iter__(self) -> Iterator[PlannedCall]:
        for calls in self.stages:
            yield from calls


@dataclass
class Export:
    folder: Path
    prediction: Prediction
    calls: Planned
    stages: dict[str, int] = field(default_factory=dict)  # calls exported by stage, in their order

    def by_stage(self) -> dict[str, int]:
        return dict(self.stages)


def planned_calls(params: EngineSettings) -> tuple[Prediction, Planned]:
    """The calls the next `dvc repro` will send to the model, as `judgeloop status` predicts them."""
    identity = batch_identity(params)
    prediction = predict(params, known=(identity, "llm.digest, as batch rounds key replies"))
    return prediction, Planned(prediction)


def export(
    params: EngineSettings,
    folder: Path = DEFAULT_FOLDER,
    planned: tuple[Prediction, Planned] | None = None,
) -> Export:
    """Write the planned calls (planned now, unless given) to `folder`, its earlier export replaced."""
    prediction, calls = planned or planned_calls(params)
    backend = OpenAICompatBackend(params.llm)  # builds bodies; sends nothing
    stages: Counter[str] = Counter()
    # Written line by line (issue 33): a million 20 kB requests are never one string in memory, and
    # the plan is read back from the dry run's file a call at a time (pipeline.tools.status.planned).
    try:
        with replacing(folder / REQUESTS_FILE) as requests, replacing(folder / MANIFEST_FILE) as manifest:
            for c in calls:
                body = backend.request_body(c.request)
                requests.write(_line({"custom_id": c.key, "method": "POST", "url": BATCH_URL, "body": body}))
                exported = {
                    "custom_id": c.key,
                    "model": c.model.model_dump(mode="json"),
                    "request": c.request_json,
                    "context": c.context.describe(),
                }
                manifest.write(_line(exported))
                stages[c.context.stage] += 1
    finally:
        backend.close()
    return Export(folder, prediction, calls, dict(stages))


def _line(value: Any) -> bytes:
    return orjson.dumps(value) + b"\n"


@dataclass
class Ingested:
    stored: int = 0
    known: int = 0  # already in the cache
    errors: list[str] = field(default_factory=list)  # the job's own: reported, nothing stored
    refused: list[str] = field(default_factory=list)  # lines that cannot be trusted

    def summary(self) -> str:
        return (
            f"{self.stored} replies stored, {self.known} already in the cache, {len(self.errors)} errors "
            f"reported by the job, {len(self.refused)} lines refused"
        )


_DATED = re.compile(r"-(\d{4})-(\d{2})-(\d{2})")  # a provider's dated snapshot (gpt-4o-mini-2024-07-18)


def answered_by(model: str, said: Any) -> bool:
    """Whether the model a reply names is the one asked for, or a dated snapshot of it: a real date
    (NAME-0000-99-99 is no snapshot, but another model that merely looks like one)."""
    if said == model:
        return True
    if not isinstance(said, str) or not said.startswith(model):
        return False
    dated = _DATED.fullmatch(said, len(model))
    if dated is None:
        return False
    year, month, day = (int(part) for part in dated.groups())
    try:
        date(year, month, day)
    except ValueError:
        return False
    return 2000 <= year <= 2100


class _Ingest:
    """One results file checked line by line against the export (see the module's docstring).

    Streamed (issue 33): the results file is read twice, one line at a time, and never held. The
    first pass keeps a digest of each key's answer, to find the keys answered twice differently
    (neither is stored); the second checks each line and stores its reply at once. The manifest
    keeps only where each request is (pipeline.tools.batch.manifest); each key's answer digest
    and whether it was stored are 17 bytes in two flat arrays at the key's slot, so that what
    ingest holds per call besides the manifest does not grow with the results file's lines."""

    def __init__(self, params: EngineSettings, folder: Path, results: Path, opened: IO[bytes]) -> None:
        self.identity = batch_identity(params)
        self.model = params.llm.model
        backend = OpenAICompatBackend(params.llm)  # builds the bodies export wrote; sends nothing
        try:
            self.requests = Manifest(folder, self.identity, backend.request_body)
        finally:
            backend.close()
        try:
            self.altered = exported_intact(folder, self.requests, params)
        except BaseException:
            self.requests.close()
            raise
        self.results, self.opened = results, opened  # each pass reads this one descriptor
        self.outcome = Ingested()
        slots = self.requests.slots
        self.digests = bytearray(_DIGEST_BYTES * slots)  # at a key's slot: its first answer's digest
        self.answered = bytearray(slots)  # at a key's slot: 1 once it has that digest
        self.done = bytearray(slots)  # at a key's slot: 1 once its answer was taken
        self.twice: set[str] = set()  # keys answered twice, differently (a job's fault: few)
        self.taken = 0  # answers that hold, handed to the cache: stored, or known already

    def _first_digest(self, key: str) -> bytes:
        at = _DIGEST_BYTES * self.requests.slot(key)
        return bytes(self.digests[at : at + _DIGEST_BYTES])

    def first_pass(self) -> None:
        for _, entry in objects(self.results, self.opened):
            key = entry.get("custom_id") if isinstance(entry, dict) else None
            if isinstance(key, str) and key in self.requests:
                slot, digest = self.requests.slot(key), _digest(entry)
                if not self.answered[slot]:
                    self.answered[slot] = 1
                    self.digests[_DIGEST_BYTES * slot : _DIGEST_BYTES * (slot + 1)] = digest
                elif self._first_digest(key) != digest:
                    self.twice.add(key)

    def line(self, number: int, entry: Any, store: CallStore) -> None:
        where = f"{self.results}:{number}"
        key = self._exported_key(where, entry)
        if key is None:
            return
        if key in self.twice:
            if _digest(entry) != self._first_digest(key):
                self.outcome.refused.append(
                    f"{where}: {key} is answered twice, differently: neither is stored"
                )
            return
        slot = self.requests.slot(key)
        if self.done[slot]:
            return  # the same answer again: one answer
        self.done[slot] = 1
        record = self._answer(where, key, entry)
        if record is None:
            return
        # Gathered and written SEED_BATCH at a time, one transaction each (the last by `finish`): a
        # third of a put's cost. A crash loses at most a batch, which the results file still holds
        # for the next ingest. A key the cache holds already keeps its entry; each write says how
        # many it stored, so that no key is looked up in the cache on its own (issue 33: a lookup
        # a call in an index that outgrows SQLite's page cache).
        self.taken += 1
        self.outcome.stored += store.seed(record)

    def finish(self, store: CallStore) -> Ingested:
        """The last records written; the answers taken that were not stored were in the cache."""
        self.outcome.stored += store.flush()
        self.outcome.known = self.taken - self.outcome.stored
        return self.outcome

    def _exported_key(self, where: str, entry: Any) -> str | None:
        """The line's custom_id, if it is a key exported and left as it was; else why not, refused."""
        key = entry.get("custom_id") if isinstance(entry, dict) else None
        if isinstance(entry, RepeatedKey):  # orjson kept the last value; the service may have meant the first
            why = f"{entry}: neither value is stored"
        elif not isinstance(key, str):
            why = f"not JSON ({entry})" if isinstance(entry, ValueError) else "no custom_id"
        elif key not in self.requests:
            why = f"custom_id {key[:80]!r} was not exported (unknown or altered id)"
        elif key in self.altered:
            why = self.altered[key]
        else:
            return key
        self.outcome.refused.append(f"{where}: {why}")
        return None

    def _answer(self, where: str, key: str, entry: dict[str, Any]) -> CallRecord | None:
        """The record of a 200 by the exported model; the job's error, or a refusal, otherwise."""
        response, error = entry.get("response"), entry.get("error")
        body = response.get("body") if isinstance(response, dict) else None
        status = response.get("status_code") if isinstance(response, dict) else None
        if error or status != 200 or not isinstance(body, dict):
            said = body_error(error if isinstance(error, dict) and "error" in error else {"error": error})
            self.outcome.errors.append(f"{where}: {key}: {said or body_error(body) or f'HTTP {status}'}")
            return None
        if not answered_by(self.model, body.get("model")):
            said = body.get("model")
            self.outcome.refused.append(f"{where}: answered by {said!r}, not llm.model {self.model!r}")
            return None
        request = self.requests.request(key)
        try:
            reply = completion_reply(body, request, where)
        except BackendError as exc:
            self.outcome.errors.append(f"{where}: {key}: {exc.message}")
            return None
        return CallRecord.new(self.identity, request, reply)


_DIGEST_BYTES = 16


def _digest(entry: Any) -> bytes:
    """An answer's digest: two lines that parse to the same JSON have the same one."""
    canonical = orjson.dumps(entry, option=orjson.OPT_SORT_KEYS)
    return hashlib.blake2b(canonical, digest_size=_DIGEST_BYTES).digest()


def ingest(params: EngineSettings, results: Path, folder: Path = DEFAULT_FOLDER) -> Ingested:
    """Check `results` against the export in `folder` and store what holds in the local cache."""
    if params.cache.mode == "off":
        raise ConfigError(
            "cache.mode is off, which stores no reply. Fix: run batch rounds with cache.mode auto."
        )
    fix = "Fix: name the file the batch job wrote."
    # Opened once, a regular file (never a pipe waited on), for both passes: the answers checked
    # twice for their digests are the answers stored, whatever is renamed to the path meanwhile.
    try:
        opened = open_regular(results)
    except FileNotFoundError:
        raise ConfigError(f"{results}: no such results file. {fix}") from None
    except OSError as exc:  # a pipe, a folder, a device; or not ours to read
        raise ConfigError(f"{results}: cannot be read ({exc}). {fix}") from None
    with opened:
        reading = _Ingest(params, folder, results, opened)
        store = CallStore(Path(params.cache.dir))
        try:
            reading.first_pass()
            for number, entry in objects(results, opened):
                reading.line(number, entry, store)
            return reading.finish(store)
        finally:
            store.close()
            reading.requests.close()
