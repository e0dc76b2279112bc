"""A RAG row's retrieved passages as the generator's and the evaluator's prompts show them."""

from __future__ import annotations

from pipeline.data.rag_rows import RagRow


def passages_block(row: RagRow) -> str:
    if not row.contexts:
        return "(none retrieved)"
    return "\n".join(f"[{n}] {text}" for n, text in enumerate(row.contexts, start=1))
