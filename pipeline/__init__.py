"""judgeloop: reproducible LLM-as-a-judge experiments with feedback-driven refinement."""

__version__ = "0.2.0"
