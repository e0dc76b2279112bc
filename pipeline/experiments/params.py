"""params.yaml, typed: every design's sections gathered in one model, checked as a whole.

Each stage reads only its own design's sections (e.g. pipeline.experiments.paper.params); the
tools (`judgeloop status`, `audit`, `cache`) read the whole file with this model, so a misspelt
section is refused rather than ignored. A new design adds its params class to the bases.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pipeline.experiments.paper.params import PaperParams
from pipeline.experiments.regen.params import RegenParams
from pipeline.llm.settings import load_settings


class Params(PaperParams, RegenParams):
    pass


def load_params(path: Path | None = None, *, environ: Mapping[str, str] | None = None) -> Params:
    return load_settings(Params, path, environ=environ)
