"""A verified call line matched against the request its caller holds, so that the line's request is
not rebuilt from its blocks (StageIndex.call_with, issue 33): the request's fields besides its
messages compared as canonical JSON, and each message laid out over the caller's (its literal parts
as written, each block its text's length of the caller's text), as unpack_content lays one out.
"""

from __future__ import annotations

from typing import Any

from pipeline.llm.blocks import Laid
from pipeline.llm.keys import canonical_json
from pipeline.llm.recordings.offsets import LazyBlobs
from pipeline.llm.types import ChatRequest


def request_fields(request: ChatRequest) -> str:
    """A request's fields besides its messages, as a recording line writes them (canonical JSON)."""
    return canonical_json(request.model_dump(mode="json", exclude={"messages"}))


def laid_out(
    messages: list[Any], request: ChatRequest, blobs: LazyBlobs, *, keep: bool = True
) -> list[Laid] | None:
    """Each of the line's messages laid out over the caller's message of the same place (its literal
    parts as written, each block its text's length of the caller's text), as unpack_content lays a
    message out; None where they do not line up (another count, role, part or length). `keep` False:
    the same checks, and each message's layout left empty (no block's text cut out)."""
    if len(messages) != len(request.messages):
        return None
    layout: list[Laid] = []
    for written, message in zip(messages, request.messages, strict=True):
        if written["role"] != message.role or len(written) != 2:
            return None
        laid = _message_laid(written["content"], message.content, blobs, keep)
        if laid is None:
            return None
        layout.append(laid)
    return layout


def _message_laid(parts: Any, content: str, blobs: LazyBlobs, keep: bool) -> Laid | None:
    """One message's layout (`parts` as the line writes them, over the caller's `content`), or None."""
    if isinstance(parts, str):
        return content if parts == content else None
    laid: list[str | tuple[str]] = []
    at = 0
    for part in parts:
        if isinstance(part, str):
            if not content.startswith(part, at):
                return None
            if keep:
                laid.append(part)
            at += len(part)
            continue
        chars = blobs.length(part["blob"]) if len(part) == 1 else None
        if chars is None:
            return None
        if keep:
            laid.append((content[at : at + chars],))
        at += chars
    return laid if at == len(content) else None
