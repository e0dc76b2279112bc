"""`judgeloop exp list`: the experiments run on this commit, one short line each: its name, its
commit, the params it changed and the headline numbers that moved against its baseline.

`dvc exp show` prints every param and metric of every experiment as a column, which here is
wider than any terminal and ends as a row of `…`. This table keeps what tells experiments apart;
`judgeloop compare BASELINE NAME --all` shows one of them in full.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline.errors import JudgeloopError
from pipeline.experiments.registry import designs
from pipeline.llm.terminal import guarded
from pipeline.tools.compare import _delta, _headline, _number, read_runs
from pipeline.tools.compare_params import ABSENT, leaves, same

WIDTH = 100


def experiments(all_commits: bool = False) -> list[tuple[str, str, str]]:
    """(name, its commit, its baseline commit) of each experiment, newest baseline first."""
    from dvc.exceptions import DvcException
    from dvc.repo import Repo

    try:
        with Repo(".") as repo:
            found = repo.experiments.ls(all_commits=all_commits)
    except DvcException as exc:
        raise JudgeloopError(f"cannot list the experiments: {exc}") from exc
    return [(name, sha or "", baseline) for baseline, runs in found.items() for name, sha in runs]


def changed_params(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """`key=value` for each params value the experiment changed."""
    # compare's rule (pipeline.tools.compare_params): by type and value, NaN equal; a list named whole
    before, after = (
        {k: v for data in run.values() for k, v in leaves(data, lists=False).items()} for run in (old, new)
    )
    keys = sorted(before.keys() | after.keys())
    return [
        f"{key}={after.get(key, '(absent)')}"
        for key in keys
        if not same(before.get(key, ABSENT), after.get(key, ABSENT))
    ]


def moved_numbers(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """`design: label old → new` for each headline number that changed."""
    moved = []
    for design in designs():
        try:
            path = design.metrics_path(design.load_params())
        except JudgeloopError:
            continue
        if path is None:
            continue
        try:
            a = _headline(design, old.get(path.as_posix()), f"{path.as_posix()} in the baseline")
            b = _headline(design, new.get(path.as_posix()), f"{path.as_posix()} in the experiment")
        except JudgeloopError as exc:
            moved.append(f"{design.name}: {exc.message}")
            continue
        for label in dict.fromkeys([*a, *b]):
            change = _delta(a.get(label), b.get(label))
            if change != "=" and not (a.get(label) is None and b.get(label) is None):
                moved.append(f"{design.name}: {label} {_number(a.get(label))} → {_number(b.get(label))}")
    return moved


def render_list(all_commits: bool = False) -> str:
    found = experiments(all_commits)
    if not found:
        return "no experiments on this commit (run one: judgeloop exp -S section.key=value)\n"
    revs = list(dict.fromkeys([*(base for _, _, base in found), *(name for name, _, _ in found)]))
    metrics, params = read_runs(revs)
    lines = [f"{'experiment':<24}{'commit':<9}{'baseline':<9}changed params; headline numbers that moved"]
    for name, sha, base in found:
        changed = changed_params(params[base], params[name]) or ["(no param changed)"]
        moved = moved_numbers(metrics[base], metrics[name])
        head = f"{name[:23]:<24}{sha[:7]:<9}{base[:7]:<9}"
        lines.append((head + ", ".join(changed))[:WIDTH])
        for number in moved[:4]:
            lines.append((" " * 42 + number)[:WIDTH])
        if len(moved) > 4:
            lines.append(" " * 42 + f"... {len(moved) - 4} more: judgeloop compare {base[:7]} {name}")
        if not moved:
            lines.append(" " * 42 + "(no headline number moved)")
    # Params and metrics are what an experiment's commit holds (a teammate's): each line one line,
    # every control shown as its escape, a tab kept as `diff` keeps it (pipeline.llm.terminal.shown_line).
    return "\n".join(guarded(line, line=True) for line in lines) + "\n"
