"""Loops that send a judge's feedback back to the generator: the paper's refinement loop (feedback)."""
