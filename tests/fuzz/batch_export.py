"""The batch export the fuzz tests start from: the default experiment's first two calls, exported
for an OpenAI-compatible server (as tests/test_batch.py makes it)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml

from pipeline.experiments.params import load_params
from pipeline.tools.batch.exchange import export
from tests.fuzz.support import ROOT, committed


def export_two_calls(sandbox: Path, name: str) -> Path:
    """The export written to sandbox/name (the demo data and a params.yaml beside it)."""
    shutil.copytree(ROOT / "data" / "demo", sandbox / "data" / "demo", dirs_exist_ok=True)
    params: dict[str, Any] = yaml.safe_load(committed("params.yaml"))
    params["llm"].update({"backend": "openai", "model": "test-model", "digest": "rev-1"})
    params["llm"]["base_url"] = "http://127.0.0.1:9"
    params["data"]["limit"] = 2
    (sandbox / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    folder = sandbox / name
    export(load_params(sandbox / "params.yaml"), folder)
    return folder
