"""The paper's assess step: a qualitative assessment of every transcript, side by side.

Steps are functions of params, a session and their inputs, with no file I/O; STEP says what the
stage reads and writes (pipeline.experiments.steps): the stage runner runs it, and `judgeloop
status` runs it with no model to count the calls the next run needs. Each step is its own module so
that a stage imports (and DVC tracks) only the code it runs.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.data.transcripts import Transcript, Transcripts, index_transcripts
from pipeline.experiments.paper.params import PaperParams
from pipeline.experiments.steps import LLMStep, jsonl_output, share
from pipeline.judges.rubric.assessor import assess
from pipeline.judges.rubric.results import Assessment
from pipeline.llm.runner import run_items
from pipeline.llm.session import LLMSession


def run_assess(
    params: PaperParams, session: LLMSession, transcripts: Sequence[Transcript]
) -> list[Assessment]:
    return run_items(
        session, transcripts, lambda t: assess(session, t, params.assess, params.llm.options), "assess"
    )


# The transcripts are an index, each read when its item runs (issue 33: not all held at once).
STEP: LLMStep[PaperParams, Transcripts, Assessment] = LLMStep(
    inputs=lambda params, _: index_transcripts(params.data),
    items=lambda transcripts: list(transcripts.ids),
    work=run_assess,
    output=jsonl_output(Assessment),
    done=lambda results: share(sum(not a.valid for a in results), len(results), "assessments", "invalid"),
)
