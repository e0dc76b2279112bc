"""The local call store: one diskcache, key -> CallRecord as JSON.

A value is two JSON documents on two lines: the record without its request, then the request.
A cache hit already holds a request equal to the stored one (the key says so), so it parses only
the first, short line (with orjson, about 4 times faster than the json module on it); a 20 kB prompt
is not parsed again on every hit. The model's identity, the same in every record of a run, is one
interned object rather than a new one per hit (a stage keeps every call it served, and fewer
objects per call halve the garbage collector's share of a hit).

diskcache's default size limit (1 GB) evicts entries silently; a cache that forgets recorded calls
would turn a replay into a live run, so eviction is off. SQLite in WAL mode with a busy timeout
lets several processes (parallel `dvc exp run`s) read and write one store safely.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import diskcache
import orjson

from pipeline.errors import CorruptRecordError
from pipeline.llm.records import CallRecord
from pipeline.llm.types import ChatRequest, ModelIdentity


class CallStore:
    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self._cache = diskcache.Cache(
            str(directory),
            eviction_policy="none",
            size_limit=2**62,
            timeout=60,
            sqlite_journal_mode="wal",
        )
        self._identities: dict[tuple[Any, ...], ModelIdentity] = {}

    def get(self, key: str, request: ChatRequest | None = None) -> CallRecord | None:
        """The record stored under key. Given the request the key was derived from, only the
        record's header is parsed; without it (audits, verify) the stored request is read too."""
        raw = self._cache.get(key)
        if raw is None:
            return None
        raw = bytes(raw)
        end = raw.find(b"\n")
        try:
            if end < 0:
                return CallRecord.model_validate_json(raw)
            # Slicing the header alone: a hit does not copy the 20 kB request it already holds.
            fields = orjson.loads(raw[:end])
            fields["request"] = request if request is not None else orjson.loads(raw[end + 1 :])
            fields["model"] = self._interned(fields.get("model"))
            return CallRecord.model_validate(fields)
        except (ValueError, TypeError, AttributeError) as exc:  # not a record's shape, whatever it is
            raise CorruptRecordError(
                f"{self.directory}: the record for {key} cannot be read ({exc}). "
                f"Fix: run `judgeloop cache verify --delete-corrupt`."
            ) from exc

    def _interned(self, model: Any) -> Any:
        # Every record of a run names the same model: one object for it, not one per hit.
        try:
            seen = tuple(model.items())
            identity = self._identities.get(seen)
        except (AttributeError, TypeError):  # not an object of strings: let validation say so
            return model
        if identity is None:
            identity = self._identities[seen] = ModelIdentity.model_validate(model)
        return identity

    def get_raw(self, key: str) -> bytes | None:
        raw = self._cache.get(key)
        return None if raw is None else bytes(raw)

    def put(self, record: CallRecord) -> None:
        header = record.model_dump_json(exclude={"request"})
        self._cache.set(record.key, f"{header}\n{record.request.model_dump_json()}".encode())

    def put_raw(self, key: str, raw: bytes) -> None:
        self._cache.set(key, raw)

    def delete(self, key: str) -> bool:
        return bool(self._cache.delete(key))

    def __contains__(self, key: str) -> bool:
        return key in self._cache

    def __len__(self) -> int:
        return len(self._cache)

    def keys(self) -> Iterator[str]:
        for key in self._cache.iterkeys():
            yield str(key)

    def volume(self) -> int:
        return int(self._cache.volume())

    def close(self) -> None:
        self._cache.close()
