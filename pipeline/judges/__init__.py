"""Judges: how a score is read or asked for. The text extractor (scores, prose_verdicts), the agreement
statistics that measure a judge against people (agreement, calibration), and the paper's rubric
judge (rubric/). Imports only pipeline.llm and pipeline.data."""
