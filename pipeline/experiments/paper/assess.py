"""The paper's assess step: a qualitative assessment of every transcript, side by side.

Steps are functions of params, a session and their inputs, with no file I/O; STEP says what the
stage reads and writes (pipeline.experiments.steps): the stage runner runs it, and `judgeloop
status` runs it with no model to count the calls the next run needs. Each step is its own module so
that a stage imports (and DVC tracks) only the code it runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pipeline.data.transcripts import Transcript, Transcripts, index_transcripts
from pipeline.experiments.paper.params import PaperParams
from pipeline.experiments.steps import LLMStep, counted, jsonl_output
from pipeline.judges.rubric.assessor import assess
from pipeline.judges.rubric.results import Assessment
from pipeline.llm.runner import held, iter_items
from pipeline.llm.session import LLMSession


def stream_assess(
    params: PaperParams, session: LLMSession, transcripts: Sequence[Transcript]
) -> Iterable[Assessment]:
    return iter_items(
        session, transcripts, lambda t: assess(session, t, params.assess, params.llm.options), "assess"
    )


run_assess = held(stream_assess)


# The transcripts are an index, each read when its item runs (issue 33: not all held at once).
STEP: LLMStep[PaperParams, Transcripts, Assessment] = LLMStep(
    inputs=lambda params, _: index_transcripts(params.data),
    items=lambda transcripts: list(transcripts.ids),
    stream=stream_assess,
    output=jsonl_output(Assessment),
    done=counted(lambda a: not a.valid, "assessments", "invalid"),
)
