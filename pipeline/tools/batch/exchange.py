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

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import orjson

from pipeline.errors import BackendError, ConfigError, CorruptRecordError
from pipeline.llm.backends.http_errors import body_error
from pipeline.llm.backends.openai_compat import OpenAICompatBackend, completion_reply
from pipeline.llm.bounds import LineTooLong, bounded_lines, depth_problem
from pipeline.llm.files import atomic_write
from pipeline.llm.keys import request_key
from pipeline.llm.records import CallRecord, RecordedCall
from pipeline.llm.settings import EngineSettings
from pipeline.llm.store import CallStore
from pipeline.llm.types import ChatRequest, ModelIdentity
from pipeline.tools.status.command import predict
from pipeline.tools.status.prediction import Prediction

BATCH_URL = "/v1/chat/completions"
REQUESTS_FILE = "requests.jsonl"
MANIFEST_FILE = "manifest.jsonl"
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


@dataclass
class Export:
    folder: Path
    prediction: Prediction
    calls: list[RecordedCall]

    def by_stage(self) -> dict[str, int]:
        return dict(Counter(call.context.stage for call in self.calls))


def planned_calls(params: EngineSettings) -> tuple[Prediction, list[RecordedCall]]:
    """The calls the next `dvc repro` will send to the model, as `judgeloop status` predicts them."""
    identity = batch_identity(params)
    prediction = predict(params, known=(identity, "llm.digest, as batch rounds key replies"))
    calls = [call for stage in prediction.stages if stage.probe for call in stage.probe.model_calls]
    return prediction, calls


def export(
    params: EngineSettings,
    folder: Path = DEFAULT_FOLDER,
    planned: tuple[Prediction, list[RecordedCall]] | None = None,
) -> Export:
    """Write the planned calls (planned now, unless given) to `folder`, its earlier export replaced."""
    prediction, calls = planned or planned_calls(params)
    backend = OpenAICompatBackend(params.llm)  # builds bodies; sends nothing
    try:
        requests = [
            _line(
                {
                    "custom_id": c.record.key,
                    "method": "POST",
                    "url": BATCH_URL,
                    "body": backend.request_body(c.record.request),
                }
            )
            for c in calls
        ]
    finally:
        backend.close()
    manifest = [
        _line(
            {
                "custom_id": c.record.key,
                "model": c.record.model.model_dump(mode="json"),
                "request": c.record.request.model_dump(mode="json"),
                "context": c.context.describe(),
            }
        )
        for c in calls
    ]
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(folder / REQUESTS_FILE, "".join(requests))
    atomic_write(folder / MANIFEST_FILE, "".join(manifest))
    return Export(folder, prediction, calls)


def _line(value: Any) -> str:
    return orjson.dumps(value).decode() + "\n"


def _objects(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON or the ValueError) for every non-blank line; a line too long or
    too deeply nested to be a batch line is a ValueError too (pipeline.llm.bounds), and a line too
    long ends the read there."""
    try:
        for number, raw in bounded_lines(path):
            if raw.strip():
                try:
                    value = orjson.loads(raw)
                except orjson.JSONDecodeError as exc:
                    yield number, exc
                    continue
                deep = depth_problem(value)
                yield number, (ValueError(deep) if deep is not None else value)
    except LineTooLong as exc:
        yield exc.number, exc


def read_manifest(folder: Path, identity: ModelIdentity) -> dict[str, ChatRequest]:
    """key -> the request exported under it, each key re-derived; CorruptRecordError at the first
    line that does not hold (the whole export is then refused: export again)."""
    path = folder / MANIFEST_FILE
    if not path.is_file():
        raise ConfigError(
            f"{path}: no manifest there. Fix: run `judgeloop batch export` (into {folder}) first."
        )
    requests: dict[str, ChatRequest] = {}
    for number, entry in _objects(path):
        where = f"{path}:{number}"
        try:
            if not isinstance(entry, dict):
                raise ValueError("not a JSON object")
            model = ModelIdentity.model_validate(entry.get("model"))
            request = ChatRequest.model_validate(entry.get("request"))
        except ValueError as exc:
            raise CorruptRecordError(
                f"{where}: not a line batch export writes ({exc}). Fix: export again."
            ) from exc
        if model != identity:
            raise CorruptRecordError(
                f"{where}: exported for {model.name} {model.digest}, but params.yaml now names "
                f"{identity.name} {identity.digest}: its replies would be stored under other weights' keys. "
                "Fix: export again."
            )
        if request_key(identity, request) != entry.get("custom_id"):
            raise CorruptRecordError(
                f"{where}: its custom_id is not the key of its request (the manifest was edited). "
                "Fix: export again."
            )
        requests[request_key(identity, request)] = request
    return requests


def exported_intact(folder: Path, requests: dict[str, ChatRequest], params: EngineSettings) -> dict[str, str]:
    """key -> why requests.jsonl no longer holds, for that key, the body its request makes."""
    backend = OpenAICompatBackend(params.llm)
    try:
        expected = {key: backend.request_body(request) for key, request in requests.items()}
    finally:
        backend.close()
    path = folder / REQUESTS_FILE
    problems: dict[str, str] = {}
    seen: set[str] = set()
    for number, entry in _objects(path) if path.is_file() else iter(()):
        key = entry.get("custom_id") if isinstance(entry, dict) else None
        if not isinstance(key, str) or key not in expected:
            continue  # a line for no exported key asks nothing that could be stored
        seen.add(key)
        line = {"custom_id": key, "method": "POST", "url": BATCH_URL, "body": expected[key]}
        if entry != line:
            problems[key] = (
                f"{path}:{number} is not the request exported under {key} (edited after the export)"
            )
    for key in expected.keys() - seen:
        problems[key] = f"{path} has no line for {key}, which the manifest lists"
    return problems


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
    """One results file checked line by line against the export (see the module's docstring)."""

    def __init__(self, params: EngineSettings, folder: Path, results: Path) -> None:
        self.identity = batch_identity(params)
        self.model = params.llm.model
        self.requests = read_manifest(folder, self.identity)
        self.altered = exported_intact(folder, self.requests, params)
        self.results = results
        self.outcome = Ingested()
        self.replies: dict[str, CallRecord] = {}
        self.answers: dict[str, Any] = {}

    def line(self, number: int, entry: Any) -> None:
        where = f"{self.results}:{number}"
        key = self._exported_key(where, entry)
        if key is None:
            return
        if key in self.answers:
            if self.answers[key] != entry:
                self.outcome.refused.append(
                    f"{where}: {key} is answered twice, differently: neither is stored"
                )
                self.replies.pop(key, None)
            return
        self.answers[key] = entry
        self._answer(where, key, entry)

    def _exported_key(self, where: str, entry: Any) -> str | None:
        """The line's custom_id, if it is a key exported and left as it was; else why not, refused."""
        key = entry.get("custom_id") if isinstance(entry, dict) else None
        if not isinstance(key, str):
            why = f"not JSON ({entry})" if isinstance(entry, ValueError) else "no custom_id"
        elif key not in self.requests:
            why = f"custom_id {key[:80]!r} was not exported (unknown or altered id)"
        elif key in self.altered:
            why = self.altered[key]
        else:
            return key
        self.outcome.refused.append(f"{where}: {why}")
        return None

    def _answer(self, where: str, key: str, entry: dict[str, Any]) -> None:
        """The reply of a 200 by the exported model; the job's error, or a refusal, otherwise."""
        response, error = entry.get("response"), entry.get("error")
        body = response.get("body") if isinstance(response, dict) else None
        status = response.get("status_code") if isinstance(response, dict) else None
        if error or status != 200 or not isinstance(body, dict):
            said = body_error(error if isinstance(error, dict) and "error" in error else {"error": error})
            self.outcome.errors.append(f"{where}: {key}: {said or body_error(body) or f'HTTP {status}'}")
            return
        if not answered_by(self.model, body.get("model")):
            said = body.get("model")
            self.outcome.refused.append(f"{where}: answered by {said!r}, not llm.model {self.model!r}")
            return
        request = self.requests[key]
        try:
            reply = completion_reply(body, request, where)
        except BackendError as exc:
            self.outcome.errors.append(f"{where}: {key}: {exc.message}")
            return
        self.replies[key] = CallRecord.new(self.identity, request, reply)

    def store(self, store: CallStore) -> Ingested:
        for key, record in sorted(self.replies.items()):
            if key in store:
                self.outcome.known += 1
            else:
                store.put(record)
                self.outcome.stored += 1
        return self.outcome


def ingest(params: EngineSettings, results: Path, folder: Path = DEFAULT_FOLDER) -> Ingested:
    """Check `results` against the export in `folder` and store what holds in the local cache."""
    if params.cache.mode == "off":
        raise ConfigError(
            "cache.mode is off, which stores no reply. Fix: run batch rounds with cache.mode auto."
        )
    if not results.is_file():
        raise ConfigError(f"{results}: no such results file. Fix: name the file the batch job wrote.")
    reading = _Ingest(params, folder, results)
    for number, entry in _objects(results):
        reading.line(number, entry)
    store = CallStore(Path(params.cache.dir))
    try:
        return reading.store(store)
    finally:
        store.close()
