"""The RAG judge's `rag` section of params.yaml (seed 002): which rows, which dimensions with which
weights, how the prompt shows the retrieved sources, and where the results go."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from pipeline.judges.structured.dimensions import Dimension, Dimensions
from pipeline.llm.params_errors import check_names
from pipeline.llm.settings import OutParam, PathParam, Section

PromptMode = Literal["full", "ids"]

# The seed's five criteria. Weights: a RAG answer that invents facts is worse than one that is
# clumsy, so accuracy (faithfulness to the sources) weighs most and coherence least.
DEFAULT_DIMENSIONS = Dimensions(
    (
        Dimension(
            name="relevance",
            description="Does the answer directly address the question that was asked?",
            weight=0.25,
        ),
        Dimension(
            name="completeness",
            description="Does the answer cover what the question needs, without major gaps?",
            weight=0.2,
        ),
        Dimension(
            name="accuracy",
            description="Is every claim in the answer supported by the retrieved sources, with nothing "
            "contradicted or invented?",
            weight=0.3,
        ),
        Dimension(
            name="source_attribution",
            description="Does the answer rest on the retrieved sources and point to them where it uses them?",
            weight=0.15,
        ),
        Dimension(name="coherence", description="Is the answer clear and well structured?", weight=0.1),
    )
)


class RagSettings(Section):
    rows: PathParam = "data/rag-demo/rows.jsonl"
    only: str | None = Field(
        None, min_length=1
    )  # keep rows whose flag of this name is true (ARES: in_v1_1_filtered)
    limit: int | None = Field(None, ge=1)
    dimensions: Dimensions = DEFAULT_DIMENSIONS
    prompt_mode: PromptMode = "full"  # full: each retrieved source's text; ids: only its identifier
    # Cut each source's text after this many characters, with a visible marker (null: never cut).
    max_context_chars: int | None = Field(None, ge=100)
    num_predict: int = Field(384, ge=16)
    max_attempts: int = Field(2, ge=1)
    logprobs: int | None = Field(5, ge=0, le=20)  # alternatives per token; null: ask for none
    # judge.samples for the RAG judge: each row judged N times, sample i with its own seed
    # (pipeline.judges.samples); each dimension's score the samples' majority. 1: asked once, the
    # request exactly as without samples.
    samples: int = Field(1, ge=1, le=100)
    # Which score each human label is compared with when asking whether low confidence predicts
    # disagreement (every score is compared with every label in the AUROC table regardless).
    label_scores: dict[str, str] = Field(
        default_factory=lambda: {"answer_faithfulness": "accuracy", "answer_relevance": "relevance"}
    )
    bootstrap_resamples: int = Field(1000, ge=100)
    seed: int = 0
    out: OutParam = "outputs/rag/judgements.jsonl"
    metrics_out: OutParam = "outputs/rag/metrics.json"
    report_md: OutParam = "outputs/rag/report.md"
    report_html: OutParam = "outputs/rag/report.html"

    @field_validator("label_scores")
    @classmethod
    def _label_scores_are_dimensions(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        # A score name that is no dimension would leave its label out of the metrics without a word.
        dimensions = info.data.get("dimensions")
        if isinstance(dimensions, Dimensions):  # absent if the dimensions themselves were refused
            check_names(list(value.values()), dimensions.names, "dimension")
        return value
