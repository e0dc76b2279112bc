"""The latest values by key, at most so many: what a session keeps of the records it served (issue 33).

A session served a key again from memory (a loop repeats its prompts), and kept every record it
served or was answered for that: at a million calls, every prompt. Repeats come close together (an
item's re-asks and rounds), so the latest few thousand serve them; an older one is looked up again,
verified as the first time.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

V = TypeVar("V")

RECENT = 512  # records (~20-40 kB each with their prompts): 20 MB at most


class Recent(Generic[V]):
    """A thread-safe map that forgets its least recently used keys past `limit` (None: never)."""

    def __init__(self, limit: int | None) -> None:
        self._limit = limit
        self._values: OrderedDict[str, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> V | None:
        with self._lock:
            value = self._values.get(key)
            if value is not None and self._limit is not None:
                self._values.move_to_end(key)
            return value

    def put(self, key: str, value: V) -> None:
        with self._lock:
            self._values[key] = value
            self._values.move_to_end(key)
            if self._limit is not None and len(self._values) > self._limit:
                self._values.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)
