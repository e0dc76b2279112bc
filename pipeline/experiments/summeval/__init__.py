"""Calibrating a judge against SummEval's expert ratings: the rubric prompts (prompts)."""
