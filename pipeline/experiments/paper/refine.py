"""The paper's refine step: the feedback loop over every judged assessment (see .assess on steps)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from pipeline.data.results_file import ByItem, ResultsFile
from pipeline.data.transcripts import Transcript, index_transcripts
from pipeline.experiments.paper.params import PaperParams
from pipeline.experiments.steps import Done, LLMStep, Upstream, jsonl_output, results_of, share
from pipeline.judges.rubric.results import Assessment, AssessmentJudgements
from pipeline.judges.unscored import unscored_reasons
from pipeline.llm.runner import held, iter_items
from pipeline.llm.session import LLMSession
from pipeline.loops.feedback import UNSCORED_STOPS, refine, unscored_share
from pipeline.loops.results import Refinement


def stream_refine(
    params: PaperParams,
    session: LLMSession,
    transcripts: Mapping[str, Transcript],
    assessments: ByItem[Assessment],
    judgements: Iterable[AssessmentJudgements],
) -> Iterable[Refinement]:
    # Past refine.stop_unscored_share of the judge's judgements unscored, no item is refined: the
    # loop's prompts would carry no score to improve on.
    halted = unscored_share(judgements) > params.refine.stop_unscored_share

    def refine_item(judgement: AssessmentJudgements) -> Refinement:
        return refine(
            session,
            transcripts[judgement.item],
            assessments[judgement.item],
            judgement.metrics,
            params.refine,
            params.assess,
            params.judge,
            params.llm.options,
            halted=halted,
        )

    return iter_items(session, judgements, refine_item, "refine")


run_refine = held(stream_refine)


@dataclass(frozen=True, slots=True)
class _Refined:
    """What one item adds to the stage's end line (its prompts and texts are not kept)."""

    refined: bool
    judged: int  # judgements this stage made (iteration 1 on; a carried-over one was made before)
    unscored: tuple[str, ...]  # why each unscored one is
    stop_reason: str


def _refined(r: Refinement) -> _Refined:
    judged = [m for i in r.iterations[1:] for m in i.metrics.values() if not m.carried_over]
    unscored = tuple(m.reading for m in judged if m.score is None)
    return _Refined(len(r.iterations) > 1, len(judged), unscored, r.stop_reason)


def _outcome(refinements: list[_Refined]) -> str:
    refined = sum(r.refined for r in refinements)
    readings = [reading for r in refinements for reading in r.unscored]
    unscored = share(len(readings), sum(r.judged for r in refinements), "judgements", "unscored")
    why = unscored_reasons(readings)
    stopped = [r for r in refinements if r.stop_reason in UNSCORED_STOPS]
    said = f"{refined} of {len(refinements)} items refined, {unscored}" + (f" ({why})" if why else "")
    if stopped:
        reason, items = stopped[0].stop_reason, f"item{'s' if len(stopped) != 1 else ''}"
        said += f"; {len(stopped)} {items} stopped early ({reason}: {UNSCORED_STOPS[reason]})"
    return said


@dataclass(frozen=True)
class Assessed:
    """The judgements of the items that have an assessment, iterated again at each pass (from their
    file, where the upstream reads files). Every judged item has its assessment, except in a dry
    run whose new assessment is not known yet."""

    judgements: Iterable[AssessmentJudgements]
    assessments: ByItem[Assessment]

    def __iter__(self) -> Iterator[AssessmentJudgements]:
        return (j for j in self.judgements if j.item in self.assessments)


@dataclass(frozen=True)
class RefineInputs:
    transcripts: Mapping[str, Transcript]
    assessments: ByItem[Assessment]
    judgements: Assessed


def refine_inputs(params: PaperParams, upstream: Upstream) -> RefineInputs:
    """What refine reads, each read again from its file an item at a time by the stage runner (issue
    33: the run's assessments and judgements are not held while it refines)."""
    transcripts = index_transcripts(params.data).by_id  # each read when its item runs
    assess = results_of(upstream, "assess", jsonl_output(Assessment))
    assessments = assess if isinstance(assess, ResultsFile) else {a.item: a for a in assess}
    judgements = Assessed(results_of(upstream, "judge", jsonl_output(AssessmentJudgements)), assessments)
    return RefineInputs(transcripts, assessments, judgements)


STEP: LLMStep[PaperParams, RefineInputs, Refinement] = LLMStep(
    inputs=refine_inputs,
    items=lambda inputs: [j.item for j in inputs.judgements],
    stream=lambda params, session, inputs: stream_refine(
        params, session, inputs.transcripts, inputs.assessments, inputs.judgements
    ),
    output=jsonl_output(Refinement),
    # With unscored_triggers false, an unscored metric passes: the loop stops on a placeholder reply.
    decides_on_unknown=lambda params: not params.refine.unscored_triggers,
    done=Done(_refined, _outcome),
)
