"""An export's manifest, read without holding it: each key and where its line is, each request read
back (and its key re-derived again) when ingest needs it.

A batch round at a million calls exports a million 20 kB requests: held as ChatRequests, the
manifest alone would take tens of GB. So the first pass checks every line (the whole export is
refused at the first that does not hold: export again) and keeps only key -> byte offset; a
request is read back from its offset when its answer is stored, and checked again, since the file
may have changed since the first pass.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import orjson
from pydantic import ValidationError

from pipeline.data.json_keys import RepeatedKey, repeated_key, shown
from pipeline.errors import ConfigError, CorruptRecordError
from pipeline.llm.backends.openai_compat import OpenAICompatBackend
from pipeline.llm.bounds import MAX_LINE_BYTES, LineTooLong, bounded_lines, depth_problem
from pipeline.llm.files import open_regular
from pipeline.llm.keys import request_key
from pipeline.llm.project_files import validation_problem
from pipeline.llm.settings import EngineSettings
from pipeline.llm.types import ChatRequest, ModelIdentity

REQUESTS_FILE = "requests.jsonl"
MANIFEST_FILE = "manifest.jsonl"
BATCH_URL = "/v1/chat/completions"


def objects(path: Path, opened: IO[bytes] | None = None) -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON or the ValueError) for every non-blank line, one at a time; a line
    too long or too deeply nested to be a batch line is a ValueError too (pipeline.llm.bounds), and
    a line too long ends the read there. A file that cannot be read (a pipe or a folder put in its
    place after the caller's look) is a ConfigError naming it. `opened`: `path` as its caller opened
    it (open_regular), read from its start: each pass over it reads the same file."""
    try:
        if opened is not None:
            opened.seek(0)
        for number, raw in bounded_lines(path if opened is None else opened):
            if raw.strip():
                try:
                    value = orjson.loads(raw)
                except orjson.JSONDecodeError as exc:
                    yield number, exc
                    continue
                deep = depth_problem(value)
                yield number, (ValueError(deep) if deep is not None else _once(raw, value))
    except LineTooLong as exc:
        yield exc.number, exc
    except OSError as exc:
        fix = "Fix: name the file the batch job wrote."
        raise ConfigError(f"{path}: cannot be read ({exc}). {fix}") from None


def _once(raw: bytes, value: Any) -> Any:
    """`value`, parsed from `raw`, or a RepeatedKey where an object of `raw` gives a key twice:
    orjson kept the last value, and the batch service that wrote the line may have meant the first
    (pipeline.data.json_keys)."""
    key = repeated_key(raw)
    return value if key is None else RepeatedKey(key)


class Manifest:
    """key -> the request exported under it, each line checked in full once (its key re-derived)
    and read back only as those same bytes.

    Each key keeps, packed in one bytes object (about 50 bytes a key, a million keys in tens of
    MB): its line's number and offset, the digest of the line as checked, and, when a body maker is
    given (ingest's openai backend), the digest of the requests.jsonl line export writes for it, so
    that `exported_intact` compares each requests line as bytes, not as parsed JSON.

    A key's line number is its slot (`slot`, below `slots`): what ingest keeps per key besides
    (seen, stored, its answer's digest) is a few bytes in flat arrays indexed by it, never a
    second set or dict of keys (issue 33: those were 400 bytes a call, 400 MB at a million)."""

    def __init__(
        self,
        folder: Path,
        identity: ModelIdentity,
        request_body: Callable[[ChatRequest], dict[str, Any]] | None = None,
    ) -> None:
        self.path = folder / MANIFEST_FILE
        self.identity = identity
        # One descriptor, of a regular file, for the first pass and every request read back: never
        # a pipe put at the path waited on, nor another file renamed there read as this one.
        try:
            self._handle = open_regular(self.path)
        except FileNotFoundError:
            raise ConfigError(
                f"{self.path}: no manifest there. Fix: run `judgeloop batch export` (into {folder}) first."
            ) from None
        except OSError as exc:  # not a file (a pipe, a folder), or not ours to read
            raise ConfigError(f"{self.path}: cannot be read ({exc}). Fix: export again.") from None
        try:
            self._first_pass(request_body)
        except BaseException:
            self.close()
            raise

    def _first_pass(self, request_body: Callable[[ChatRequest], dict[str, Any]] | None) -> None:
        self._lines: dict[str, bytes] = {}
        self.slots = 0  # every slot is below it: the last line's number, plus one
        offset = 0
        try:
            for number, raw in bounded_lines(self._handle):  # a line past the bound is never read whole
                if raw.strip():
                    key, request = self._checked(number, raw)
                    exported = _line_digest(request_line(key, request_body(request))) if request_body else b""
                    self._lines[key] = _PLACE.pack(number, offset) + _line_digest(raw) + exported
                    self.slots = number + 1
                offset += len(raw) + 1  # and its b"\n" (the last line's, if missing, is never needed)
        except LineTooLong as exc:
            raise CorruptRecordError(
                f"{self.path}:{exc.number}: not a line batch export writes ({exc}). Fix: export again."
            ) from None
        except OSError as exc:
            raise ConfigError(f"{self.path}: cannot be read ({exc}). Fix: export again.") from None

    def _checked(self, number: int, raw: bytes) -> tuple[str, ChatRequest]:
        """The key and request of one line, checked: bounded in depth before anything walks it
        (pipeline.llm.bounds: a request nested deeper is refused here, not as a RecursionError in
        its key, nor stored for the recordings' reader to refuse later)."""
        where = f"{self.path}:{number}"
        try:
            entry = orjson.loads(raw)
            if not isinstance(entry, dict):
                raise ValueError("not a JSON object")
            if (deep := depth_problem(entry)) is not None:
                raise ValueError(deep)
            model = ModelIdentity.model_validate(entry.get("model"))
            request = ChatRequest.model_validate(entry.get("request"))
        except ValueError as exc:  # pydantic's error quotes the values: only from inside the project
            said = validation_problem(self.path, exc) if isinstance(exc, ValidationError) else exc
            raise CorruptRecordError(
                f"{where}: not a line batch export writes ({said}). Fix: export again."
            ) from exc
        if model != self.identity:
            raise CorruptRecordError(
                f"{where}: exported for {model.name} {model.digest}, but params.yaml now names "
                f"{self.identity.name} {self.identity.digest}: its replies would be stored under other "
                "weights' keys. Fix: export again."
            )
        key = request_key(self.identity, request)
        if key != entry.get("custom_id"):
            raise CorruptRecordError(
                f"{where}: its custom_id is not the key of its request (the manifest was edited). "
                "Fix: export again."
            )
        return key, request

    def __contains__(self, key: object) -> bool:
        return key in self._lines

    def __len__(self) -> int:
        return len(self._lines)

    def __iter__(self) -> Iterator[str]:
        return iter(self._lines)

    def slot(self, key: str) -> int:
        """The key's place in flat per-key arrays of `slots` entries: its line's number."""
        number: int = _PLACE.unpack_from(self._lines[key])[0]
        return number

    def request(self, key: str) -> ChatRequest:
        """The request exported under `key`, read back: the same bytes as the line checked when the
        manifest was opened (its digest), so the same key under the same identity, or refused."""
        place = self._lines[key]
        number, offset = _PLACE.unpack_from(place)
        digest = place[_PLACE.size : _PLACE.size + _DIGEST_SIZE]
        self._handle.seek(offset)
        raw = self._handle.readline(MAX_LINE_BYTES + 1)  # bounded: the file may have changed since
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            raise CorruptRecordError(
                f"{self.path}:{number}: changed while it was read (a line past {MAX_LINE_BYTES:,} bytes). "
                "Fix: export again."
            )
        line = raw.removesuffix(b"\n")
        if _line_digest(line) != digest:
            raise CorruptRecordError(
                f"{self.path}:{number}: changed while it was read (it held {key}). Fix: export again."
            )
        # The bytes checked in full (depth, identity, key) when the manifest was opened: parsing
        # them again gives the same request.
        return ChatRequest.model_validate(orjson.loads(line)["request"])

    def exported_digest(self, key: str) -> bytes:
        """The digest of the requests.jsonl line export writes for `key` (b"" without a body maker)."""
        return self._lines[key][_PLACE.size + _DIGEST_SIZE :]

    def close(self) -> None:
        self._handle.close()


_PLACE = struct.Struct("<QQ")  # a manifest line's number and byte offset
_DIGEST_SIZE = 16


def _line_digest(line: bytes) -> bytes:
    return hashlib.sha256(line).digest()[:_DIGEST_SIZE]  # SHA-256: in C, about 12 µs for 20 kB


def request_line(key: str, body: dict[str, Any]) -> bytes:
    """A line of requests.jsonl, without its b"\n", as export writes it."""
    return orjson.dumps({"custom_id": key, "method": "POST", "url": BATCH_URL, "body": body})


_KEY_START = b'{"custom_id":"'


def exported_intact(folder: Path, manifest: Manifest, params: EngineSettings) -> dict[str, str]:
    """key -> why requests.jsonl no longer holds, for that key, the body its request makes.
    Streamed: a line as export wrote it is the digest the manifest keeps for its key (its bytes
    are the expected line's); any other is parsed and compared to the body its request makes."""
    path = folder / REQUESTS_FILE
    problems: dict[str, str] = {}
    seen = bytearray(manifest.slots)  # 1 where requests.jsonl has the key's line: a byte a key
    backend = OpenAICompatBackend(params.llm)
    try:
        for number, raw in _raw_lines(path):  # (none where there is no file)
            if raw.startswith(_KEY_START):
                said = raw[len(_KEY_START) : raw.find(b'"', len(_KEY_START))].decode("ascii", "replace")
                if said in manifest and _line_digest(raw) == manifest.exported_digest(said):
                    seen[manifest.slot(said)] = 1
                    continue
            entry = _parsed(raw)
            key = entry.get("custom_id") if isinstance(entry, dict) else None
            if not isinstance(key, str) or key not in manifest:
                continue  # a line for no exported key asks nothing that could be stored
            seen[manifest.slot(key)] = 1
            body = backend.request_body(manifest.request(key))
            if (twice := repeated_key(raw)) is not None:  # equal as parsed, but a service may read the first
                problems[key] = (
                    f"{path}:{number} gives the key {shown(twice)} twice in one object "
                    "(edited after the export)"
                )
            elif entry != {"custom_id": key, "method": "POST", "url": BATCH_URL, "body": body}:
                problems[key] = (
                    f"{path}:{number} is not the request exported under {key} (edited after the export)"
                )
    finally:
        backend.close()
    for key in manifest:
        if not seen[manifest.slot(key)]:
            problems[key] = f"{path} has no line for {key}, which the manifest lists"
    return problems


def _raw_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """bounded_lines' non-blank lines, ending quietly at a line past the bound (as `objects` does:
    the keys after it have no line)."""
    try:
        for number, raw in bounded_lines(path):
            if raw.strip():
                yield number, raw
    except (LineTooLong, OSError):  # not a file now (a pipe put in its place): no line, as if absent
        return


def _parsed(raw: bytes) -> Any:
    """A line's JSON, or None where `objects` would give a ValueError (a key given twice is
    exported_intact's to say)."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return None if depth_problem(value) is not None else value
