"""Input data: transcripts, labels, RAG rows, candidate catalogs, ratings, and the JSONL outputs."""
