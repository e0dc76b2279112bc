"""The SummEval experiment's section of params.yaml, `summeval`, beside the engine's `llm` and `cache`.

The defaults judge the fictional demo set (data/summeval-demo: 3 articles x 4 systems x 4
dimensions = 48 calls). The real corpus stays outside the repository; its documented subset for a
cold embedded run (pipeline/data/summeval.py: 10 articles x 12 systems, coherence and relevance =
240 calls) is

    dvc exp run -S summeval.corpus=../shared/corpora/summeval -S summeval.documents=10 \
        -S 'summeval.dimensions=[coherence,relevance]'

and the full set (1,200 summaries x 4 dimensions) is the same with `summeval.documents=null` and
the four dimensions.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from pipeline.experiments.summeval.prompts import DIMENSIONS
from pipeline.llm.params_errors import check_names
from pipeline.llm.settings import EngineSettings, OutParam, PathParam, Section, load_settings


class SummEvalSettings(Section):
    corpus: PathParam = "data/summeval-demo"  # SummEval's annotations file, or a folder holding only it
    documents: int | None = Field(None, ge=1)  # the first n articles in sha256 order; null: all
    dimensions: tuple[str, ...] = Field(DIMENSIONS, min_length=1)
    annotators: Literal["expert", "crowd"] = "expert"  # whose ratings the judge is compared with
    # {"score": N} is 6 tokens; the rest is room for the whitespace a grammar allows. A reply cut
    # here is "truncated", re-asked once, then recorded unscored.
    num_predict: int = Field(16, ge=4)
    max_attempts: int = Field(2, ge=1)
    # Alternatives kept per token: with 5, tokens such as " " or "\n" took the slots of some digits
    # at the score token (measured on SummEval), leaving a score with probability 0 it did not have.
    top_logprobs: int = Field(20, ge=1, le=20)
    # Each judgement asked this many times, sample i with its own seed (pipeline.judges.samples);
    # 1: asked once, exactly as without samples. combine: the score used (calibrated against people).
    samples: int = Field(1, ge=1, le=100)
    combine: Literal["mean", "majority"] = "mean"
    out: OutParam = "outputs/summeval/judgements.jsonl"
    metrics_out: OutParam = "outputs/summeval/metrics.json"
    plot_csv: OutParam = "outputs/summeval/plots/scores.csv"
    html_report: OutParam = "outputs/summeval/report.html"
    resamples: int = Field(1000, ge=1)  # bootstrap resamples over articles
    seed: int = 0

    @field_validator("dimensions")
    @classmethod
    def _known_dimensions(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        check_names(value, DIMENSIONS, "dimension")
        return value


class SummEvalParams(EngineSettings):
    summeval: SummEvalSettings = Field(default_factory=SummEvalSettings)


def load_summeval_params(
    path: Path | None = None, *, environ: Mapping[str, str] | None = None
) -> SummEvalParams:
    return load_settings(SummEvalParams, path, environ=environ, only_its_sections=True)
