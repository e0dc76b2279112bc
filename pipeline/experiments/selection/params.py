"""The selection experiment's section of params.yaml: `selection`, beside the engine's `llm` and `cache`.

selection:
  catalog: data/selection/catalog_fictional.csv   # or ../shared/corpora/music-spotify/spotify_tracks_2400.csv
  requests: data/selection/requests.yaml
  limit: null            # the first N requests only (null: all)
  pool_size: 24          # candidates the advocates propose per request
  max_per_artist: 2      # places one artist may hold in a pool
  k: 3                   # picks per request
  lambda: 0.7            # relevance vs diversity: 1 = score only (targets still met), 0 = diversity only
  tie_margin: 0.0        # adjacent candidates this close in weighted score are compared pairwise
  max_exact_options: 200000   # above this, select.py's greedy fallback replaces the exact search
  framework: null        # a framework replacing the requests file's default (same shape as there)
  judge_num_predict: 64  # token budget of one rating reply ({"reason", "rating"})
  compare_num_predict: 64  # token budget of one pairwise reply ({"reason", "better"})
  max_attempts: 2        # first ask + re-asks of an unusable reply; then the judgement is failed
  samples: 1             # each rating asked N times, each with its own seed (pipeline.judges.samples)
  combine: majority      # the rating used with samples > 1: their majority, or their mean

A stage of this design validates only these sections (`only_its_sections`), so another design's
sections cannot touch it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pydantic import ConfigDict, Field

from pipeline.data.listening_requests import Framework
from pipeline.judges.samples import Combine
from pipeline.llm.settings import EngineSettings, PathParam, Section, load_settings
from pipeline.llm.types import Options


class SelectionSettings(Section):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)

    catalog: PathParam = "data/selection/catalog_fictional.csv"
    requests: PathParam = "data/selection/requests.yaml"
    limit: int | None = Field(None, ge=1)
    pool_size: int = Field(24, ge=1, le=200)
    max_per_artist: int = Field(2, ge=1)
    k: int = Field(3, ge=1)
    lambda_: float = Field(0.7, ge=0.0, le=1.0, alias="lambda")
    tie_margin: float = Field(0.0, ge=0.0, le=1.0)
    max_exact_options: int = Field(200_000, ge=1)
    framework: Framework | None = None
    judge_num_predict: int = Field(64, ge=8)
    compare_num_predict: int = Field(64, ge=8)
    max_attempts: int = Field(2, ge=1, le=5)
    # judge.samples for the scorer: 1 is one call per rating, the key of a run without samples.
    samples: int = Field(1, ge=1, le=100)
    combine: Combine = "majority"


class SelectionParams(EngineSettings):
    selection: SelectionSettings = Field(default_factory=SelectionSettings)

    def judge_options(self) -> Options:
        return self.llm.options.model_copy(update={"num_predict": self.selection.judge_num_predict})

    def compare_options(self) -> Options:
        return self.llm.options.model_copy(update={"num_predict": self.selection.compare_num_predict})


def load_selection_params(
    path: Path | None = None, *, environ: Mapping[str, str] | None = None
) -> SelectionParams:
    return load_settings(SelectionParams, path, environ=environ, only_its_sections=True)
