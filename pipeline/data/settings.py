"""The `data` section of params.yaml: which transcripts an experiment reads, and how."""

from __future__ import annotations

from pydantic import Field

from pipeline.llm.settings import PathParam, Section


class DataSettings(Section):
    transcripts: PathParam = "data/demo"
    # AVEC2017 split CSV(s) inside `transcripts`: run only the participants they list (pipeline.data.labels).
    labels: PathParam | tuple[PathParam, ...] | None = None
    drop_markers: bool = False
    participant_only: bool = False
    limit: int | None = Field(None, ge=0)
    # Who is who, as the prompts name them ("Please note that 'Ellie' is the interviewer, and
    # 'Participant' is the subject being assessed"); a transcript without them is warned about.
    interviewer: str = Field("Ellie", min_length=1)
    participant: str = Field("Participant", min_length=1)
    speaker_separator: str = Field(
        " : ", min_length=1
    )  # how a turn renders in prompts; the original code's " : "
