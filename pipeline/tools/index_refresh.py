"""Which designs DVC finds out of date: what the report index names after a run of some stages only.

`judgeloop repro STAGE...` runs those stages and what they need, not the index's stage (the last of
all), so the index would go on showing the designs as they were. It is written again instead
(pipeline.tools.report_index.write_index), and names each design whose stages' code, params or
data changed since they ran, with the command that runs them.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.experiments.registry import designs


def refresh_command(design: str) -> str:
    return f"./judgeloop repro --design {design}"


def stale_designs(root: Path = Path(".")) -> dict[str, str]:
    """Design name -> the command that brings it up to date, for each design with a stage DVC
    finds changed (`dvc status`)."""
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        changed = {name.rpartition(":")[2] for name in repo.status()}
    return {
        design.name: refresh_command(design.name)
        for design in designs()
        if any(stage.name in changed for stage in design.stages)
    }
