"""`judgeloop exp list`: the experiments run on this commit, one short line each: its name, its
commit, the params it changed and the headline numbers that moved against its baseline.

`dvc exp show` prints every param and metric of every experiment as a column, which here is
wider than any terminal and ends as a row of `…`. This table keeps what tells experiments apart;
`judgeloop compare BASELINE NAME --all` shows one of them in full.

As `judgeloop compare` reads two runs (pipeline.tools.compare): each run's numbers from the metrics
file its own params name (an experiment that moved it, `-S aggregate.metrics_out=...`, is read
there; the workspace's params.yaml is no run's); a key of a params file other than params.yaml
named with its file, as `-S` names it (`other.yaml:seed=2`), so the same key in two files is two
keys. Every line is shown escaped (the params and metrics are what an experiment's commit holds, a
teammate's), then cut to 100 columns of a terminal (pipeline.tools.columns).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pipeline.errors import JudgeloopError
from pipeline.experiments.registry import designs
from pipeline.llm.terminal import closed_isolates, guarded, isolated, shown
from pipeline.tools.columns import fit, pad
from pipeline.tools.compare import _argument, _delta, _headline, _number, metrics_file, read_runs
from pipeline.tools.compare_params import ABSENT, leaves, same
from pipeline.tools.compare_runs import Unreadable

WIDTH = 100
INDENT = " " * 42  # under the params: the name, the commit and the baseline's columns
PARAMS = "params.yaml"  # the file a `-S key=value` without `file:` sets (its keys named bare)


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


def _file_changes(file: str, old: Any, new: Any) -> list[str]:
    """`key=value` for each value of one params file the experiment changed (`file:key=value` for
    a file other than params.yaml, as -S names it)."""
    prefix = "" if file == PARAMS else f"{file}:"
    unreadable = [data for data in (old, new) if isinstance(data, Unreadable)]
    if unreadable:
        return [f"{prefix}(unreadable: {unreadable[0].why})"]
    before, after = leaves(old, lists=False), leaves(new, lists=False)
    return [
        f"{prefix}{key}={after.get(key, '(absent)')}"
        for key in sorted(before.keys() | after.keys())
        if not same(before.get(key, ABSENT), after.get(key, ABSENT))
    ]


def changed_params(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """`key=value` for each params value the experiment changed, params.yaml's first, each other
    file's keys apart (the same key in two files is two)."""
    # compare's rule (pipeline.tools.compare_params): by type and value, NaN equal; a list named whole
    files = sorted(old.keys() | new.keys(), key=lambda file: (file != PARAMS, file))
    return [line for file in files for line in _file_changes(file, old.get(file, {}), new.get(file, {}))]


def moved_numbers(metrics: Sequence[Mapping[str, Any]], params: Sequence[Mapping[str, Any]]) -> list[str]:
    """`design: label old → new` for each headline number that changed between the baseline's and
    the experiment's `metrics`, each run's from the file its own `params` name (compare's
    metrics_file)."""
    moved = []
    for design in designs():
        paths = [metrics_file(design, run) for run in params]
        if None in paths:
            continue
        try:
            a, b = (
                _headline(design, run.get(str(path)), f"{path} in the {side}")
                for run, path, side in zip(metrics, paths, ("baseline", "experiment"), strict=True)
            )
        except JudgeloopError as exc:
            moved.append(f"{design.name}: {guarded(exc.message, line=True)}")
            continue
        for label in dict.fromkeys([*a, *b]):
            change = _delta(a.get(label), b.get(label))
            if change != "=" and not (a.get(label) is None and b.get(label) is None):
                # isolated: a right-to-left label would draw the two numbers after it swapped
                name = isolated(shown(label, one_line=True))
                moved.append(f"{design.name}: {name} {_number(a.get(label))} → {_number(b.get(label))}")
    return moved


def _shown(text: str) -> str:
    """Someone's text on one line, escaped (a tab kept, as `diff` keeps it: terminal.shown_line)."""
    return guarded(text, line=True)


def _lines(name: str, sha: str, base: str, changed: list[str], moved: list[str]) -> list[str]:
    """One experiment's lines, each escaped, then cut to the width (a name that holds a right-to-left
    letter isolated, as compare's are: pipeline.llm.terminal.isolated)."""
    head = f"{pad(closed_isolates(fit(isolated(shown(name, one_line=True)), 23)), 24)}"
    head += f"{_shown(sha[:7]):<9}{_shown(base[:7]):<9}"
    lines = [guarded(head, line=True, isolates=True) + _shown(", ".join(changed))]
    lines += [INDENT + guarded(number, line=True, isolates=True) for number in moved[:4]]
    if len(moved) > 4:
        lines.append(
            f"{INDENT}... {len(moved) - 4} more: judgeloop compare {base[:7]} {_shown(_argument(name))}"
        )
    if not moved:
        lines.append(INDENT + "(no headline number moved)")
    return [closed_isolates(fit(line, WIDTH)) for line in lines]


def render_list(all_commits: bool = False) -> str:
    found = experiments(all_commits)
    if not found:
        return "no experiments on this commit (run one: judgeloop exp -S section.key=value)\n"
    revs = list(dict.fromkeys([*(base for _, _, base in found), *(name for name, _, _ in found)]))
    metrics, params = read_runs(revs)
    lines = [f"{'experiment':<24}{'commit':<9}{'baseline':<9}changed params; headline numbers that moved"]
    for name, sha, base in found:
        changed = changed_params(params[base], params[name]) or ["(no param changed)"]
        moved = moved_numbers([metrics[base], metrics[name]], [params[base], params[name]])
        lines += _lines(name, sha, base, changed, moved)
    return "\n".join(lines) + "\n"
