"""The layout of each request a verified recording line was just parsed into, for the session to
seed the local cache from the recording's own blocks (issue 33).

A replay on a cold local cache copies every call it serves into the cache. Packing a 20 kB prompt
into the cache's blocks cut the text into blocks again and hashed each one, about 150 µs a call,
although the line it came from holds the same text already cut by the same rule
(pipeline.llm.blocks). So a served line's parse (StageIndex.call_at: its bytes checked against the
digest taken when its recording was verified) keeps each message's parts here, under the request
it built, and LLMSession._seed hands them to the cache (pipeline.llm.cache.blocks.pack_laid), which
takes them only where they are the rule's layout and join to the request's text.

Held for a moment, and only while its request lives: a parse's layout is taken by the seed that
follows it in the same thread; one never taken (a call read for the report, say) goes when its
request does, so that a reader of every call holds no layouts; at most HELD are held.
"""

from __future__ import annotations

import weakref

from pipeline.llm.blocks import Laid
from pipeline.llm.types import ChatRequest

HELD = 256


class ServedLayouts:
    """request (by identity, held weakly) -> its messages' layouts."""

    def __init__(self) -> None:
        self._held: dict[int, tuple[weakref.ref[ChatRequest], list[Laid]]] = {}

    def put(self, request: ChatRequest, layout: list[Laid]) -> None:
        if len(self._held) >= HELD:
            self._held.clear()
        ident = id(request)
        # Dropped as the request goes, before its id can be another object's.
        self._held[ident] = (weakref.ref(request, lambda _: self._held.pop(ident, None)), layout)

    def take(self, request: ChatRequest) -> list[Laid] | None:
        held = self._held.pop(id(request), None)
        return held[1] if held is not None and held[0]() is request else None

    def __len__(self) -> int:
        return len(self._held)


SERVED = ServedLayouts()
