"""The RAG judge's prompt: the scale and dimensions, then the question, the retrieved sources (in
full, or only their identifiers) and the answer to judge.

The RAG agent's own confidence and reasoning (the seed's RAGAnswer carries them) are left out on
purpose: the judge should not be anchored by the judged system's opinion of itself.
"""

from __future__ import annotations

from pipeline.data.rag_rows import RagRow
from pipeline.experiments.rag.settings import PromptMode
from pipeline.judges.structured.dimensions import Dimensions
from pipeline.judges.structured.judge import instructions
from pipeline.llm.types import Message

SUBJECT = "answers written by a retrieval-augmented generation (RAG) system from retrieved sources"


def _cut(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit} more characters not shown]"


def sources_block(row: RagRow, mode: PromptMode, max_chars: int | None) -> str:
    if mode == "full" and row.contexts:
        parts = []
        for number, text in enumerate(row.contexts, start=1):
            source_id = row.source_ids[number - 1] if len(row.source_ids) == len(row.contexts) else None
            header = f"[{number}]" + (f" {source_id}" if source_id else "")
            parts.append(f"{header}\n{_cut(text, max_chars)}")
        return "RETRIEVED SOURCES:\n" + "\n\n".join(parts)
    if row.source_ids:
        ids = "\n".join(f"[{n}] {s}" for n, s in enumerate(row.source_ids, start=1))
        return f"RETRIEVED SOURCE IDENTIFIERS (their text is not shown):\n{ids}"
    return "RETRIEVED SOURCES: none"


def rag_messages(
    row: RagRow, dimensions: Dimensions, mode: PromptMode, max_chars: int | None = None
) -> tuple[Message, ...]:
    user = "\n\n".join(
        [
            f"QUESTION:\n{row.question}",
            sources_block(row, mode, max_chars),
            f"ANSWER TO EVALUATE:\n{row.answer}",
            "Evaluate the answer against the question and the sources. Reply with the JSON object only.",
        ]
    )
    return (
        Message(role="system", content=instructions(dimensions, SUBJECT)),
        Message(role="user", content=user),
    )
