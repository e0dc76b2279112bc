"""What `judgeloop status` predicts for the next `dvc repro`: per stage, whether it runs and its calls."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.llm.types import ModelIdentity
from pipeline.tools.status.probe import StageProbe


@dataclass
class StageStatus:
    stage: str
    runs: bool
    why: str
    probe: StageProbe[Any] | None = None
    left_out: list[str] = field(default_factory=list)  # inputs holding a reply not known yet
    exact: bool = True

    def model_calls(self, mode: str) -> int:
        if self.probe is None:
            return 0
        return self.probe.calls if mode in ("refresh", "off") else len(self.probe.model_calls)


@dataclass
class Prediction:
    identity: ModelIdentity | None  # None: not looked up (no LLM stage runs; identity_source says so)
    identity_source: str
    mode: str
    stages_from: str
    stages: list[StageStatus]

    @property
    def model_calls(self) -> int:
        return sum(s.model_calls(self.mode) for s in self.stages)

    @property
    def exact(self) -> bool:
        return all(s.exact for s in self.stages)
