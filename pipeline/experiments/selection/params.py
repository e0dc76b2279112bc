"""The selection experiment's section of params.yaml: `selection`.

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
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from pipeline.data.listening_requests import Framework


class SelectionSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    catalog: str = "data/selection/catalog_fictional.csv"
    requests: str = "data/selection/requests.yaml"
    limit: int | None = Field(None, ge=1)
    pool_size: int = Field(24, ge=1, le=200)
    max_per_artist: int = Field(2, ge=1)
    k: int = Field(3, ge=1)
    lambda_: float = Field(0.7, ge=0.0, le=1.0, alias="lambda")
    tie_margin: float = Field(0.0, ge=0.0, le=1.0)
    max_exact_options: int = Field(200_000, ge=1)
    framework: Framework | None = None
