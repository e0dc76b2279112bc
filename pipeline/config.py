"""params.yaml, typed. Each stage reads its own section; `llm` and `cache` are shared.

Environment variables override the file (so a user can point one run elsewhere without editing a
tracked file, and tests isolate themselves):

    JUDGELOOP_PARAMS        path of params.yaml                (default ./params.yaml)
    JUDGELOOP_CACHE_DIR     local diskcache folder             (default ./.judgeloop/cache)
    JUDGELOOP_CACHE_MODE    auto | replay | refresh | off      (cache.mode)
    JUDGELOOP_BACKEND       embedded | ollama | openai | fake  (llm.backend)
    JUDGELOOP_MODEL         model name or tag                  (llm.model)
    JUDGELOOP_DIGEST        pinned model digest                (llm.digest)
    JUDGELOOP_BASE_URL      server URL                         (llm.base_url)
    JUDGELOOP_PARALLELISM   in-flight calls to the server      (llm.parallelism)
    JUDGELOOP_READ_TIMEOUT  seconds to wait for a reply        (llm.read_timeout_s)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pipeline.errors import ConfigError
from pipeline.llm.types import Options

CacheMode = Literal["auto", "replay", "refresh", "off"]
BackendKind = Literal["embedded", "ollama", "openai", "fake"]
METRICS = ("coherence", "completeness", "specificity", "accuracy")


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EmbeddedSettings(Section):
    n_threads: int = 2
    n_batch: int = 512


class LLMSettings(Section):
    backend: BackendKind = "embedded"
    model: str = "SmolLM2-135M-Instruct.Q4_1"
    digest: str | None = None
    base_url: str = "http://127.0.0.1:11434"
    api_key_env: str = "OPENAI_API_KEY"
    parallelism: int = Field(1, ge=1, le=256)
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 300.0
    max_retries: int = Field(5, ge=0)
    max_server_errors: int = Field(2, ge=0)
    options: Options = Field(default_factory=Options)
    embedded: EmbeddedSettings = Field(default_factory=EmbeddedSettings)


class CacheSettings(Section):
    mode: CacheMode = "auto"
    dir: str = ".judgeloop/cache"
    recordings: str = "recordings"


class DataSettings(Section):
    transcripts: str = "data/demo"
    # AVEC2017 split CSV(s) inside `transcripts`: run only the participants they list (pipeline.labels).
    labels: str | tuple[str, ...] | None = None
    drop_markers: bool = False
    participant_only: bool = False
    limit: int | None = None
    speaker_separator: str = " : "  # how a turn renders in prompts; the original code's " : "


class AssessSettings(Section):
    num_predict: int = 700
    max_attempts: int = Field(3, ge=1)
    verify_quotes: bool = False
    delimit_transcript: bool = False
    out: str = "outputs/assessments.jsonl"


class JudgeSettings(Section):
    metrics: tuple[str, ...] = METRICS
    num_predict: int = 256
    max_attempts: int = Field(3, ge=1)
    # A decimal on the 1-5 scale ("Score: 3.5/5"): unscored and re-asked (the default), or rounded
    # halves up and flagged `decimal_rounded`. Judgements hold integers, so the value itself is not kept.
    decimal_scores: Literal["unscored", "round"] = "unscored"
    out: str = "outputs/judgements.jsonl"


class RefineSettings(Section):
    # A score at or below the threshold sends the judge's feedback back (paper: below four -> 3).
    threshold: int = Field(3, ge=0, le=5)
    max_iterations: int = Field(10, ge=0)
    unscored_triggers: bool = True
    previous_assessment: Literal["none", "original", "previous"] = "none"
    rejudge: Literal["low", "all"] = "low"
    keep: Literal["last", "best"] = "last"
    out: str = "outputs/refinement.jsonl"


class AggregateSettings(Section):
    metrics_out: str = "metrics.json"
    plots_dir: str = "plots"
    report: str = "report.md"
    html_report: str = "report.html"


class Params(Section):
    llm: LLMSettings = Field(default_factory=LLMSettings)
    cache: CacheSettings = Field(default_factory=CacheSettings)
    data: DataSettings = Field(default_factory=DataSettings)
    assess: AssessSettings = Field(default_factory=AssessSettings)
    judge: JudgeSettings = Field(default_factory=JudgeSettings)
    refine: RefineSettings = Field(default_factory=RefineSettings)
    aggregate: AggregateSettings = Field(default_factory=AggregateSettings)


_ENV_OVERRIDES: dict[str, tuple[str, str]] = {
    "JUDGELOOP_CACHE_MODE": ("cache", "mode"),
    "JUDGELOOP_CACHE_DIR": ("cache", "dir"),
    "JUDGELOOP_BACKEND": ("llm", "backend"),
    "JUDGELOOP_MODEL": ("llm", "model"),
    "JUDGELOOP_DIGEST": ("llm", "digest"),
    "JUDGELOOP_BASE_URL": ("llm", "base_url"),
    "JUDGELOOP_PARALLELISM": ("llm", "parallelism"),
    "JUDGELOOP_READ_TIMEOUT": ("llm", "read_timeout_s"),
}


def params_path() -> Path:
    return Path(os.environ.get("JUDGELOOP_PARAMS", "params.yaml"))


def load_params(path: Path | None = None, *, environ: dict[str, str] | None = None) -> Params:
    path = path or params_path()
    env = os.environ if environ is None else environ
    raw: dict[str, Any] = {}
    if path.exists():
        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = f":{mark.line + 1}" if mark is not None else ""
            raise ConfigError(f"{path}{line}: not valid YAML ({exc}). Fix the syntax there.") from exc
        raw = loaded or {}
    for var, (section, field) in _ENV_OVERRIDES.items():
        if var in env and env[var] != "":
            raw.setdefault(section, {})[field] = env[var]
    try:
        return Params.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors())
        raise ConfigError(
            f"{path}: {problems}. Fix the value in {path} or the JUDGELOOP_* variable that overrides it."
        ) from exc
