"""The local call store: one diskcache, key -> CallRecord as JSON.

A value is two JSON documents on two lines: the record without its request, then the request.
A cache hit already holds a request equal to the stored one (the key says so), so it parses only
the first, short line (with orjson, about 4 times faster than the json module on it); a 20 kB prompt
is not parsed again on every hit.

diskcache's default size limit (1 GB) evicts entries silently; a cache that forgets recorded calls
would turn a replay into a live run, so eviction is off. SQLite in WAL mode with a busy timeout
lets several processes (parallel `dvc exp run`s) read and write one store safely.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import diskcache
import orjson

from pipeline.errors import CorruptRecordError
from pipeline.llm.records import CallRecord
from pipeline.llm.types import ChatRequest


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
            return CallRecord.model_validate(fields)
        except ValueError as exc:
            raise CorruptRecordError(
                f"{self.directory}: the record for {key} cannot be read ({exc}). "
                f"Fix: run `judgeloop cache verify --delete-corrupt`."
            ) from exc

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
