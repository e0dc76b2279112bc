"""LLM access: typed requests and replies, backends, the content-addressed call cache."""
