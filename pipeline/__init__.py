"""judgeloop: reproducible LLM-as-a-judge experiments with feedback-driven refinement."""

__version__ = "0.1.0"
