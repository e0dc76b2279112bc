"""params.yaml as a whole: the engine's sections and every registered design's, checked together.

A stage reads only its own design's sections (Design.load_params); the tools (`judgeloop status`,
`audit`, `cache`) read the whole file here, so that a misspelt section is refused rather than
ignored. The model is gathered from the registry: a new design's sections join it with no edit here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import create_model

from pipeline.errors import ConfigError
from pipeline.experiments.registry import designs
from pipeline.llm.settings import EngineSettings, load_settings, params_path

# What the tools read of params.yaml: the engine's sections, typed; each design's through its own model.
Params = EngineSettings


@cache
def params_model() -> type[EngineSettings]:
    """EngineSettings with every design's sections; two designs may share a section only if it is
    the same model."""
    fields: dict[str, Any] = {}
    owners: dict[str, str] = {}
    for design in designs():
        for name, info in design.params.model_fields.items():
            if name in EngineSettings.model_fields:
                continue
            if name in fields and fields[name][0] != info.annotation:
                raise ConfigError(
                    f"params section {name!r} is declared by designs {owners[name]} and {design.name} "
                    "with different models. Fix: rename one of them."
                )
            fields[name], owners[name] = (info.annotation, info), design.name
    model: type[EngineSettings] = create_model("Params", __base__=EngineSettings, **fields)
    return model


def require_params_file() -> Path:
    """The params.yaml the tools read (./params.yaml, or JUDGELOOP_PARAMS), which must exist: run
    from another folder, the tools would otherwise read no experiment and print nothing of it."""
    path = params_path()
    if not path.is_file():
        where = "JUDGELOOP_PARAMS names" if "JUDGELOOP_PARAMS" in os.environ else f"in {Path.cwd()} there is"
        raise ConfigError(
            f"no params.yaml: {where} no file {path}. judgeloop reads the experiment in the folder it "
            "runs in. Fix: cd to the project's folder (where params.yaml and dvc.yaml are), or set "
            "JUDGELOOP_PARAMS=path/to/params.yaml."
        )
    return path


def load_params(path: Path | None = None, *, environ: Mapping[str, str] | None = None) -> Params:
    """params.yaml as a whole (path: default the project's, which must exist)."""
    return load_settings(params_model(), path or require_params_file(), environ=environ)
