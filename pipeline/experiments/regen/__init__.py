"""Regenerate on a low score (seed 004) on RAG rows: generate -> evaluate -> regenerate -> aggregate.

Steps are functions of params, a session and their inputs, with no file I/O (as the paper's
steps are); stages/regen_*.py call them and write the results.
"""
