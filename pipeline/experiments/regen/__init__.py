"""Regenerate on a low score (seed 004) on RAG rows: generate -> evaluate -> regenerate -> aggregate.

Steps are functions of params, a session and their inputs, with no file I/O (as the paper's
steps are); each step module's STEP says what its stage reads and writes (design.py lists them).
"""
