"""Judges: how a score is read or asked for. The text extractor (scores, prose_verdicts), the paper's
rubric judge (rubric/), the structured judge of any dimensions (structured/) and the answer-quality
evaluator (quality/). The statistics that measure a judge against people are a layer of their own
beside this one (pipeline.stats). Imports only pipeline.llm and pipeline.data."""
