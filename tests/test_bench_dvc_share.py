"""bench/dvc_share.py's rewrite of dvc.yaml's code deps (issue 31's sizing of DVC's per-dep work):
`files` leaves dvc.yaml as it is, the others fold each stage's code deps into folders, each named once
per stage, and leave every other dep, param and out as they were."""

from __future__ import annotations

from pathlib import Path

import yaml

from bench.dvc_share import rewrite

ROOT = Path(__file__).resolve().parents[1]

SAMPLE = """\
stages:
  assess:
    cmd: python -m stages paper assess
    deps:
      - ${data.transcripts}
      - pipeline/__init__.py
      - pipeline/data/jsonl.py
      - pipeline/data/labels.py
      - pipeline/experiments/paper/assess.py
      - pipeline/experiments/design.py
      - pipeline/llm
      - stages/__init__.py
      - stages/runner.py
    params:
      - data
    outs:
      - recordings/assess:
          cache: false
  judge:
    cmd: python -m stages paper judge
    deps:
      - outputs/paper/assessments.jsonl
      - pipeline/data/jsonl.py
      - stages/runner.py
"""


def deps(text: str) -> dict[str, list[str]]:
    return {name: stage["deps"] for name, stage in yaml.safe_load(text)["stages"].items()}


def test_files_leaves_the_repositorys_dvc_yaml_as_it_is() -> None:
    text = (ROOT / "dvc.yaml").read_text()
    assert rewrite(text, "files") == text


def test_packages_fold_each_package_and_each_design_once_per_stage() -> None:
    folded = rewrite(SAMPLE, "packages")
    assert deps(folded) == {
        "assess": [
            "${data.transcripts}",
            "pipeline/__init__.py",
            "pipeline/data",
            "pipeline/experiments/paper",
            "pipeline/experiments",
            "pipeline/llm",
            "stages",
        ],
        "judge": ["outputs/paper/assessments.jsonl", "pipeline/data", "stages"],
    }
    parsed, original = yaml.safe_load(folded)["stages"], yaml.safe_load(SAMPLE)["stages"]
    for name, stage in original.items():
        assert {k: v for k, v in parsed[name].items() if k != "deps"} == {
            k: v for k, v in stage.items() if k != "deps"
        }


def test_whole_leaves_one_pipeline_and_one_stages_dep_per_stage() -> None:
    assert deps(rewrite(SAMPLE, "whole")) == {
        "assess": ["${data.transcripts}", "pipeline", "stages"],
        "judge": ["outputs/paper/assessments.jsonl", "pipeline", "stages"],
    }
