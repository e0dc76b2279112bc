"""A request stored as references to content-addressed blocks: an interview is held once in the
local cache, however many prompts carry it (issue 33).

Each message's text is cut into blocks of whole lines at content-defined boundaries
(pipeline.llm.blocks, the recordings' rule). A block of MIN_BLOCK characters or more is stored once,
zlib-compressed, in the cache's block store, under its id: the first 32 hex digits (128 bits) of the
sha256 of its UTF-8 bytes; the message becomes a list of literal strings and {"b": id} references
(a short text stays one string). The recordings pack their blocks the same way, in their own file and format
(pipeline.llm.recordings.line_format); the two rooms share nothing but the rule.

Nothing here is trusted on its own. A block is checked against its id when read (a damaged or
edited block is refused, never joined into a request); a record whose request is rebuilt from
blocks is then verified in full by its reader (its checksum, and its key re-derived from the rebuilt
request). A hit needs no block at all: the caller holds the request whose key it looked up, and
the record's seal binds the reply to that key (pipeline.llm.cache.store).

Why 128 bits: an id is written once per block reference, about thirty times in every 20 kB prompt,
and 32 hex digits where 64 would do nothing more for us (a collision would still fail the record's
checksum, which covers the whole request) keep a record near the size of its own text.
"""

from __future__ import annotations

import hashlib
import re
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import diskcache
import orjson

from pipeline.llm.blocks import MIN_BLOCK, Laid, Part, block_fits, pack_parts
from pipeline.llm.bounds import MAX_LINE_BYTES
from pipeline.llm.cache import bulk
from pipeline.llm.types import ChatRequest

ID_CHARS = 32
REF = "b"
# A reference as orjson writes it. Literal text holding these characters is escaped (\"), so the
# pattern only finds references (or a request's own JSON schema shaped like one: a block kept, never
# one lost); what `gc` keeps.
REFERENCE = re.compile(rb'\{"b":"([0-9a-f]{32})"\}')
_ID = re.compile(r"[0-9a-f]{32}")
KNOWN_LIMIT = 200_000  # ids remembered as stored, before the memory is cleared (a check per block then)
VERIFIED_CHARS = 32 * 2**20  # text of the blocks kept as read and verified (a rebuilt request's own)
FACTS_CHARS = 16 * 2**20  # text of the blocks whose ids and fit are kept, for seeding (BlockFacts)


def block_id(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:ID_CHARS]


class MissingBlock(Exception):
    """A record refers to a block the store does not hold (or holds damaged)."""


def pack_text(text: str, blocks: dict[str, bytes]) -> str | list[Part]:
    def keep(block: str) -> dict[str, str]:
        data = block.encode()
        ident = block_id(data)
        blocks[ident] = data
        return {REF: ident}

    parts = pack_parts(text, keep)
    if len(parts) == 1 and isinstance(parts[0], str):
        return parts[0]
    return parts or text


# What the store knows of a block's text: its id, and whether split_blocks cuts exactly it when more
# text follows it, and when it ends the text (pipeline.llm.blocks.block_fits).
Facts = tuple[str, bool, bool]


class BlockFacts:
    """Each block text's Facts, worked out once while FACTS_CHARS of text are kept: a text's id and
    fit are its own, so every store of the process shares them. An item's calls share its
    interview's blocks, and a recording serves them as the same string objects, whose hash Python
    keeps: a known block costs a lookup."""

    def __init__(self) -> None:
        self._known: dict[str, Facts] = {}
        self._chars = 0
        self._lock = threading.Lock()

    def __call__(self, text: str) -> Facts:
        known = self._known.get(text)
        if known is not None:
            return known
        inner, final = block_fits(text)
        known = (block_id(text.encode()), inner, final)
        with self._lock:
            if self._chars > FACTS_CHARS:
                self._known, self._chars = {}, 0
            self._known[text] = known
            self._chars += len(text)
        return known


FACTS = BlockFacts()


def laid_text(laid: Laid, content: str, blocks: dict[str, bytes | str]) -> str | list[Part] | None:
    """pack_text(content), built from `laid`, the layout of `content` in a recording's line, without
    cutting the text again (the blocks' text into `blocks`, their ids from FACTS); None when the
    layout does not join to `content` or is not the one split_blocks gives (a recording cut another
    way: the caller cuts the text itself). Whatever the layout, the entry is the one a live call
    writes."""
    if isinstance(laid, str):
        return laid if len(laid) < MIN_BLOCK and laid == content else None  # a longer one holds a block
    parts: list[Part] = []
    texts: list[str] = []
    last = len(laid) - 1
    for at, part in enumerate(laid):
        if isinstance(part, str):
            if not _last_literal(part, at == last and at > 0):
                return None
            parts.append(part)
            texts.append(part)
            continue
        text = part[0]
        ident, inner, final = FACTS(text)
        if not (final if at == last else inner and not _straddles(text, laid[at + 1])):
            return None
        blocks[ident] = text
        parts.append({REF: ident})
        texts.append(text)
    return (parts or "") if "".join(texts) == content else None


def _last_literal(part: str, last: bool) -> bool:
    """Literal text in a layout of the rule's is the text's last block, shorter than a stored one,
    after a stored one (a text that is one such block is laid out as one string)."""
    return last and 0 < len(part) < MIN_BLOCK


def _straddles(block: str, after: str | tuple[str]) -> bool:
    """Whether a block ending in "\r" is followed by a "\n": one line break, across two parts."""
    return block.endswith("\r") and (after if isinstance(after, str) else after[0]).startswith("\n")


def inflate(data: bytes) -> bytes:
    """One zlib stream, inflated to at most MAX_LINE_BYTES (a block is at most a line of a request,
    a packed request less than its line in a recording); zlib.error for anything else."""
    stream = zlib.decompressobj()
    out = stream.decompress(data, MAX_LINE_BYTES)
    if not stream.eof or stream.unconsumed_tail or stream.unused_data:
        raise zlib.error("not one zlib stream of at most a line's size")
    return out


def pack_request(request: ChatRequest) -> tuple[bytes, dict[str, bytes]]:
    """The request as JSON with its messages' long text as block references, zlib-compressed (the
    references' hex digits are half of a record's bytes otherwise), and those blocks."""
    fields = request.model_dump(mode="json")
    blocks: dict[str, bytes] = {}
    for message in fields["messages"]:
        message["content"] = pack_text(message["content"], blocks)
    return zlib.compress(orjson.dumps(fields)), blocks


def pack_laid(request: ChatRequest, layout: list[Laid]) -> tuple[bytes, dict[str, bytes | str]] | None:
    """pack_request's bytes and blocks (their text), built from the layout of the request's messages
    in a verified recording line rather than by cutting and hashing each 20 kB prompt again; None
    where a message's layout is not the rule's, or not of its text (then pack_request)."""
    fields = request.model_dump(mode="json")
    messages = fields["messages"]
    if len(messages) != len(layout):
        return None
    blocks: dict[str, bytes | str] = {}
    for message, laid in zip(messages, layout, strict=True):
        content = laid_text(laid, message["content"], blocks)
        if content is None:
            return None
        message["content"] = content
    return zlib.compress(orjson.dumps(fields)), blocks


def unpack_request(packed: bytes, block: Callable[[str], str]) -> Any:
    """The request's fields from pack_request's bytes, each reference replaced by `block(id)`'s text.
    ValueError or TypeError for what is not that shape; MissingBlock from `block`."""
    try:
        fields = orjson.loads(inflate(packed))
    except zlib.error as exc:
        raise ValueError(f"the stored request is damaged ({exc})") from None
    for message in fields["messages"]:
        content = message["content"]
        if isinstance(content, list):
            message["content"] = "".join(_part(part, block) for part in content)
    return fields


def _part(part: Any, block: Callable[[str], str]) -> str:
    if isinstance(part, str):
        return part
    ident = part.get(REF) if isinstance(part, dict) and len(part) == 1 else None
    if not isinstance(ident, str) or _ID.fullmatch(ident) is None:
        raise ValueError(f"a message part that is neither text nor a block reference: {str(part)[:80]}")
    return block(ident)


def references(packed: bytes) -> Iterator[bytes]:
    """The block ids (ASCII bytes) a packed request refers to, found without parsing it (none for
    one that does not inflate: its entry cannot be read anyway)."""
    try:
        text = inflate(packed)
    except zlib.error:
        return iter(())
    return (match.group(1) for match in REFERENCE.finditer(text))


class BlockStore:
    """The blocks: a diskcache of its own (id -> the block's UTF-8 bytes, zlib-compressed), opened by
    the call store with the same safe disk (no pickle, no links, no foreign schema). Writes skip
    blocks already stored, and write a request's new blocks in one transaction; reads verify each
    block against its id (after a decompression bounded by MAX_LINE_BYTES: a block is at most a
    line of a request, or MAX_BLOCK characters), and keep the last VERIFIED_CHARS of text verified."""

    def __init__(self, cache: diskcache.Cache) -> None:
        self.cache = cache
        self._known: set[str] = set()  # stored by this process, or found stored
        self._verified: OrderedDict[str, str] = OrderedDict()
        self._verified_chars = 0
        self._lock = threading.Lock()

    def add(self, blocks: Mapping[str, bytes | str]) -> None:
        """Store the blocks not stored yet (each as its UTF-8 bytes, or its text)."""
        new = [ident for ident in blocks if ident not in self._known]
        if not new:
            return
        with self.cache.transact():  # held, so that no writer comes between the check and the write
            held = bulk.stored(self.cache, new)  # a statement per few hundred (pipeline.llm.cache.bulk)
            bulk.add_new(
                self.cache,
                (
                    (ident, zlib.compress(data if isinstance(data, bytes) else data.encode()))
                    for ident, data in ((ident, blocks[ident]) for ident in new if ident not in held)
                ),
                held,
            )
        with self._lock:
            if len(self._known) + len(new) > KNOWN_LIMIT:
                self._known.clear()
            self._known.update(new)

    def text(self, ident: str) -> str:
        """The block's text, verified against its id; MissingBlock if absent, damaged or not text."""
        with self._lock:
            text = self._verified.get(ident)
        if text is not None:
            return text
        text = self._read(ident)
        with self._lock:
            if ident not in self._verified:
                self._verified[ident] = text
                self._verified_chars += len(text)
            while self._verified_chars > VERIFIED_CHARS:
                self._verified_chars -= len(self._verified.popitem(last=False)[1])
        return text

    def _read(self, ident: str) -> str:
        stored = self.cache.get(ident)  # RefusedValue for what judgeloop never writes: the caller's
        if not isinstance(stored, bytes):
            raise MissingBlock(f"refers to block {ident}, which the cache's blocks do not hold")
        try:
            data = inflate(stored)
        except zlib.error as exc:
            raise MissingBlock(f"refers to block {ident}, whose stored bytes are damaged ({exc})") from None
        if block_id(data) != ident:
            raise MissingBlock(f"refers to block {ident}, whose stored text does not hash to it (damaged)")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise MissingBlock(f"refers to block {ident}, which is not UTF-8 text") from None

    def forget(self) -> None:
        """Drop what this process remembers as stored (after blocks were deleted)."""
        with self._lock:
            self._known.clear()
            self._verified.clear()
            self._verified_chars = 0
