"""Which designs DVC finds out of date: what the report index names after a run of some stages only.

`judgeloop repro STAGE...` runs those stages and what they need, not the index's stage (the last of
all), so the index would go on showing the designs as they were. It is written again instead
(pipeline.tools.report_index.write_index), and names each design whose stages' code, params or
data changed since they ran, with the command that runs them.

What DVC is asked, and what it is not (issue 31). The answer is the designs with a stage that
`dvc status` finds changed; each stage's status is its own (its deps, outs and command against its
entry in dvc.lock), so it is asked stage by stage, only of the designs' stages, and a design is
done with at its first changed stage. A stage the run has just brought up to date is not asked
at all: the `dvc repro` of plain targets that has just succeeded ran, or found unchanged, each
target and everything upstream of it (the stages DVC itself plans from those targets, found the
same way here), and either leaves a stage just as `dvc status` wants it, its lock entry what is on
disk. Not so, and asked as before: a frozen stage (repro leaves it alone), one always changed (or
with no deps or outs: status says so every time), and a stage of a .dvc file (an import, which
status also asks its source about). A target that is not one stage by name (a file, a group)
means nothing is taken as known: every design's stages are asked.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.experiments.registry import designs

if TYPE_CHECKING:
    from dvc.repo import Repo
    from dvc.stage import Stage


def refresh_command(design: str) -> str:
    return f"./judgeloop repro --design {design}"


def stale_designs(root: Path = Path("."), ran: Sequence[str] = ()) -> dict[str, str]:
    """Design name -> the command that brings it up to date, for each design with a stage DVC
    finds changed (`dvc status`). `ran`: the targets of the `dvc repro` (with no option but
    --force) that has just succeeded in `root`, whose stages are not asked again (see the module);
    the answer is what asking every stage gives."""
    from dvc.repo import Repo, lock_repo

    with Repo(str(root)) as repo, lock_repo(repo):  # as `dvc status` holds the repo's lock
        known = just_reproduced(repo, ran)
        by_name: dict[str, list[Stage]] = {}
        for stage in repo.index.stages:  # `dvc status` names a stage by its address: dvc.yaml's as `name`
            by_name.setdefault(stage.addressing.rpartition(":")[2], []).append(stage)
        return {
            design.name: refresh_command(design.name)
            for design in designs()
            if any(
                _changed(stage)
                for wanted in design.stages
                for stage in by_name.get(wanted.name, [])
                if stage not in known
            )
        }


def just_reproduced(repo: Repo, targets: Collection[str]) -> set[Stage]:
    """The stages a `dvc repro TARGETS` that has just succeeded left as `dvc status` wants them:
    the ones it planned (each target and its upstream, as DVC plans them), less those status finds
    changed whatever a repro did (see the module); none unless each target is one stage's address."""
    from dvc.repo.reproduce import get_active_graph, plan_repro
    from dvc.stage import PipelineStage

    stages = repo.index.stages
    chosen = [[stage for stage in stages if stage.addressing == target] for target in targets]
    if not chosen or any(len(found) != 1 for found in chosen):
        return set()
    planned = plan_repro(get_active_graph(repo.index.graph), [found[0] for found in chosen])
    return {
        stage
        for stage in planned
        if isinstance(stage, PipelineStage)
        and not (stage.frozen or stage.always_changed or stage.is_callback)
    }


def _changed(stage: Stage) -> bool:
    """Whether `dvc status` lists the stage (as it asks each: updates of imports too)."""
    from dvc.repo.status import _joint_status

    return bool(_joint_status([(stage, None)], check_updates=True))
