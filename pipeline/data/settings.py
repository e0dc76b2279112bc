"""The `data` section of params.yaml: which transcripts an experiment reads, and how."""

from __future__ import annotations

from pipeline.llm.settings import Section


class DataSettings(Section):
    transcripts: str = "data/demo"
    # AVEC2017 split CSV(s) inside `transcripts`: run only the participants they list (pipeline.data.labels).
    labels: str | tuple[str, ...] | None = None
    drop_markers: bool = False
    participant_only: bool = False
    limit: int | None = None
    speaker_separator: str = " : "  # how a turn renders in prompts; the original code's " : "
