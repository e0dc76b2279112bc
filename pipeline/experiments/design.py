"""What a judge design is: one object, DESIGN, that its folder's design.py exports.

    DESIGN = Design(
        name="paper",
        params=PaperParams,                     # its params.yaml sections (a pydantic model)
        stages=(
            Stage(
                "assess",
                run="pipeline.experiments.paper.assess:STEP",
                deps=("${data.transcripts}",),
                outs=("${assess.out}",),
                params=("data", "assess"),
            ),
            ...
        ),
        report="pipeline.experiments.paper.aggregate:report",
    )

The Stage is the one description of a DVC stage: `judgeloop dvc-yaml` writes dvc.yaml from it
(its code dependencies are what the stage imports, found by importing it), `python -m stages
DESIGN STAGE` runs it, and `judgeloop status` dry-runs it. Paths may name a params value as DVC
does, `${section.key}`.

Code is named by "module:attribute" and imported only when used, so that running one stage
imports that stage's code and no other's: DVC re-runs a stage when its code changes, and a stage
that imported its design's other stages would re-run whenever any of them changed. A stage's
`run` is an LLMStep (pipeline.experiments.steps: it calls a model, through a session recorded in
recordings/<stage>/) or a function of the design's params (it calls none, like an aggregate).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel

from pipeline.errors import ConfigError
from pipeline.llm.settings import EngineSettings, load_settings

if TYPE_CHECKING:  # only named: a stage that does not calibrate need not import them
    from pipeline.data.ratings import HumanRatings, JudgedItem

P = TypeVar("P", bound=EngineSettings)

# The params an LLM stage depends on besides its own: what changes a reply (pipeline.llm.settings).
LLM_PARAMS = ("llm.backend", "llm.model", "llm.digest", "llm.options", "llm.embedded")
RECORDINGS = "recordings"  # an LLM stage's calls go to recordings/<stage>/ (cache.recordings)
PARAM_REFERENCE = re.compile(r"\$\{([A-Za-z_][\w.]*)\}")  # ${section.key}, as DVC writes it


def load_ref(ref: str) -> Any:
    """The attribute a "module:attribute" reference names, its module imported now."""
    module, _, attribute = ref.partition(":")
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot load {ref!r}: {exc}. Fix the reference (module:attribute).") from exc


def param_value(params: BaseModel, dotted: str) -> Any:
    value: Any = params
    for name in dotted.split("."):
        value = value[name] if isinstance(value, Mapping) else getattr(value, name)
    return value


def resolve(path: str, params: BaseModel) -> Path:
    """A stage path with its `${section.key}` references replaced by the params' values."""
    return Path(PARAM_REFERENCE.sub(lambda m: str(param_value(params, m.group(1))), path))


@dataclass(frozen=True)
class Plot:
    """A plot file of a stage, as dvc.yaml describes it for `dvc plots`."""

    path: str
    x: str
    y: str
    title: str
    template: str | None = None


@dataclass(frozen=True)
class Stage:
    """One DVC stage. `deps`: the data it reads (files, folders, other stages' outputs; its code is
    found from its imports); `outs`: what it writes; for an LLM stage the first is its results file
    (pipeline.experiments.steps.Output), and recordings/<stage>/ is added; `params`: the params.yaml
    keys it reads (an LLM stage also depends on LLM_PARAMS)."""

    name: str
    run: str
    deps: tuple[str, ...] = ()
    outs: tuple[str, ...] = ()
    params: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    plots: tuple[Plot, ...] = ()

    def load(self) -> Any:
        """What runs the stage: an LLMStep, or a function of the design's params."""
        return load_ref(self.run)


Number = float | int
# A design's headline numbers: (label, value) rows read from its metrics.json; what `judgeloop
# compare` sets side by side and the report index shows. None: not in that run's metrics.
Headline = list[tuple[str, Number | None]]


def dig(metrics: Mapping[str, Any], dotted: str | tuple[str, ...]) -> Number | None:
    """The number at `a.b.c` (or at the keys of a tuple: a name from the metrics file may hold a
    dot) in a metrics dict, or None where the run has none (an older run)."""
    value: Any = metrics
    for key in dotted.split(".") if isinstance(dotted, str) else dotted:
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Design(Generic[P]):
    """A judge design: its params sections, its stages in order, and the code the tools call.

    report: "module:function" of (params) -> the files it wrote: the design's report pages from its
    outputs, as its last stage writes them (`judgeloop report`).
    commands: `judgeloop` subcommands it adds, name -> "module:attribute" of a click command.
    calibration: "module:function" of (params) -> CalibrationRows, its
    judge's scores against people's ratings (`judgeloop calibrate --experiment NAME`).
    headline: "module:function" of (its metrics.json, a dict) -> Headline: the few numbers that say
    how a run went (`judgeloop compare`, the report index).
    judgements: "module:function" of (params, RunFiles) -> Iterable[Judgement]: its judgement unit,
    read from one run's results and recordings (pipeline.experiments.judgements; `judgeloop diff`).
    reads: "module:function" of (params.yaml as the tools read it, or None without one) -> a function
    of (a recorded call's context, its CallRecord) -> the CallReading its stage made of that reply
    (pipeline.judges.call_reading), or None for a call that is not read for a score: the one way the
    design reads a judge reply, which `judgeloop audit` shows for the calls of its stages.
    """

    name: str
    title: str
    params: type[P]
    stages: tuple[Stage, ...]
    report: str | None = None
    commands: Mapping[str, str] = field(default_factory=dict)
    calibration: str | None = None
    headline: str | None = None
    judgements: str | None = None
    reads: str | None = None

    def stage(self, name: str) -> Stage:
        for stage in self.stages:
            if stage.name == name:
                return stage
        have = ", ".join(s.name for s in self.stages)
        raise ConfigError(f"design {self.name} has no stage {name!r} (its stages: {have})")

    def load_params(self, path: Path | None = None, *, environ: Mapping[str, str] | None = None) -> P:
        """params.yaml's sections of this design (and the engine's), the others ignored: a stage
        depends on its own design's sections alone. Its entry of llm_overrides, if any, is laid
        over llm."""
        return load_settings(self.params, path, environ=environ, only_its_sections=True, design=self.name)

    def metrics_path(self, params: P) -> Path | None:
        """Its metrics file (the first its stages declare), where params put it."""
        declared = [m for stage in self.stages for m in stage.metrics]
        return resolve(declared[0], params) if declared else None

    def report_path(self, params: P) -> Path | None:
        """Its report page: the out of its stages named report.html (or the last .html out)."""
        outs = [resolve(out, params) for stage in self.stages for out in stage.outs]
        pages = [path for path in outs if path.suffix == ".html"]
        named = [p for p in pages if p.name == "report.html"]
        return (named or pages)[-1] if pages else None

    def results_path(self, stage: str, params: P) -> Path:
        """Where an LLM stage writes its results: its first out."""
        outs = self.stage(stage).outs
        if not outs:
            raise ConfigError(f"design {self.name}: stage {stage} has no outs to write its results to")
        return resolve(outs[0], params)


@dataclass(frozen=True)
class CalibrationRows:
    """A design's judge scores and the people's ratings of the same items, and the bootstrap its
    own metrics use (`judgeloop calibrate --experiment NAME` prints the same table)."""

    scores: Sequence[JudgedItem]
    humans: Sequence[HumanRatings]
    resamples: int
    seed: int
