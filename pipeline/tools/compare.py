"""`judgeloop compare`: two runs side by side, each design's headline numbers with the change.

    judgeloop compare                  the last commit (HEAD) against the workspace
    judgeloop compare REV              REV against the workspace
    judgeloop compare A B              A against B

A run is a git revision (a commit, a branch, a tag, HEAD~1) or a DVC experiment's name (`dvc exp
show` lists them); `workspace` is the files as they are. DVC reads each run's metrics and params
(dvc.repo.Repo.metrics/params.show, which resolve experiment names too, and answer two names of one
commit under one key, "main,HEAD"); each design says which of its numbers are the headline (its
Design.headline, from the registry), and each run's metrics file is where that run's own params put
it (metrics_file), so the workspace's params.yaml is needed by no other run. The table fits 100
columns of a terminal (pipeline.tools.columns): a row a number that changed (`--all`: every
number), set as pipeline.tools.compare_numbers shows numbers, the params that differ between the two
runs above it (pipeline.tools.compare_params). Every name in it (a run's, a metric's from a
metrics file, a param's) is shown escaped on its one line, then cut. Whether a change exceeds noise
is `judgeloop diff`'s: the table names that command where a number moved.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from pipeline.errors import JudgeloopError
from pipeline.experiments.design import PARAM_REFERENCE, Design, Headline, Number, load_ref, param_value
from pipeline.experiments.params import require_params_file
from pipeline.experiments.registry import designs
from pipeline.llm.terminal import echo, guarded, isolated, shown
from pipeline.tools.columns import columns, fit, pad, right
from pipeline.tools.compare_numbers import DELTA, VALUE, cells
from pipeline.tools.compare_params import ABSENT, leaves, params_changes
from pipeline.tools.compare_runs import WORKSPACE, Unreadable, _by_rev, read_runs

WIDTH = 100
LABEL = WIDTH - 2 - 2 * VALUE - DELTA  # the rows are indented by two
# A run's name every shell reads as it is (HEAD~1, exp-1a2b3, main): not quoted where a command is
# suggested. Not `^` (zsh's extended glob reads HEAD^ as a pattern), nor a leading `=` (zsh's =cmd).
_PLAIN_ARG = re.compile(r"[\w@%+:,./-][\w@%+=:,./~-]*", re.ASCII)
__all__ = [
    "WORKSPACE",
    "Unreadable",
    "_by_rev",
    "cells",
    "design_table",
    "metrics_file",
    "params_changes",
    "read_runs",
    "render",
]


def _number(value: Number | None) -> str:
    """One number as the table shows it (`judgeloop exp list`)."""
    return cells(value, value)[0]


def _delta(old: Number | None, new: Number | None) -> str:
    """The change as the table shows it: "=" for none (`judgeloop exp list`)."""
    return cells(old, new)[2]


def _fit(text: str, width: int) -> str:
    return fit(text, width)


def _line(text: str, width: int = WIDTH) -> str:
    """Someone's text (a metric's name, a run's, a path) on one line: escaped, then cut."""
    return _fit(shown(text, one_line=True), width)


def _row(label: str, a: str, b: str, delta: str) -> str:
    """A row of the table: its label (someone's text, isolated: pipeline.llm.terminal.isolated, so
    that a right-to-left name leaves the numbers after it in their order) and three cells."""
    name = isolated(_line(label, LABEL - 1))
    return f"  {pad(name, LABEL)}{right(a, VALUE)}{right(b, VALUE)}{delta:>{DELTA}}".rstrip()


def _numbers(design: Design[Any], rows: Headline) -> tuple[dict[str, Number | None], list[str]]:
    """A headline's rows by label (a label given twice gets ` (2)`), and a line for each value that
    is not a number (a registered design's headline is code someone else wrote)."""
    numbers: dict[str, Number | None] = {}
    odd = []
    for label, value in rows:
        key, n = str(label), 1
        while key in numbers:
            n += 1
            key = f"{label} ({n})"
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            odd.append(
                f"{design.name}'s headline gave {key!r} not a number but {type(value).__name__} "
                f"{value!r}. Fix: its function ({design.headline}) gives a number or None"
            )
            value = None
        numbers[key] = value
    return numbers, odd


def _headline_rows(
    design: Design[Any], metrics: Mapping[str, Any] | None, where: str
) -> tuple[dict[str, Number | None], list[str]]:
    """The design's headline numbers in `metrics` (the file `where`), and what of them is not a
    number; JudgeloopError, naming it, where the file's numbers are not where the design writes
    them (a file someone edited)."""
    if metrics is None or design.headline is None:
        return {}, []
    try:
        rows: Headline = load_ref(design.headline)(metrics)
        return _numbers(design, rows)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise JudgeloopError(
            f"{where} is not a metrics file of the {design.name} design ({type(exc).__name__}: {exc}). "
            "Fix: restore it from git, or re-run the design's stages (judgeloop repro)."
        ) from exc


def _headline(design: Design[Any], metrics: Mapping[str, Any] | None, where: str) -> dict[str, Number | None]:
    """The design's headline numbers in `metrics` (what is not a number as None): `judgeloop exp list`."""
    return _headline_rows(design, metrics, where)[0]


def _headlines(
    design: Design[Any], paths: Sequence[str], found: Sequence[Mapping[str, Any] | None], names: Sequence[str]
) -> tuple[list[dict[str, Number | None]], list[str]]:
    """Each run's headline numbers, and a line for each run whose metrics file cannot be read."""
    headlines, problems = [], []
    for metrics, path, name in zip(found, paths, names, strict=True):
        try:
            numbers, odd = _headline_rows(design, metrics, f"{path} in {name}")
        except JudgeloopError as exc:
            numbers, odd = {}, [exc.message]
        headlines.append(numbers)
        problems += [f"  ({_fit(guarded(line, line=True), WIDTH - 4)})" for line in dict.fromkeys(odd)]
    return headlines, list(dict.fromkeys(problems))


def _rows(
    old: Mapping[str, Number | None], new: Mapping[str, Number | None], show_all: bool
) -> tuple[list[str], int]:
    """A row for each number (show_all False: each that changed), and how many did not change."""
    rows, same = [], 0
    for label in dict.fromkeys([*old, *new]):
        a, b, change = cells(old.get(label), new.get(label))
        unchanged = change == "=" or (old.get(label) is None and new.get(label) is None)
        same += unchanged
        if show_all or not unchanged:
            rows.append(_row(label, a, b, change))
    return rows, same


def _missing(
    found: Sequence[Mapping[str, Any] | None], paths: Sequence[str], names: Sequence[str]
) -> list[str]:
    """A line for each run without the metrics file, or whose file DVC could not read."""
    lines = []
    for metrics, path, name in zip(found, paths, names, strict=True):
        if metrics is None:
            lines.append(f"  ({_line(f'no {path} in {name}', WIDTH - 4)})")
        elif isinstance(metrics, Unreadable):
            lines.append(f"  ({_line(f'{path} in {name}: {metrics.why}', WIDTH - 4)})")
    return lines


def _table(
    design: Design[Any],
    paths: Sequence[str],
    runs: Sequence[Mapping[str, Any]],
    names: Sequence[str],
    show_all: bool,
) -> tuple[list[str], int]:
    """The design's rows, and how many of its numbers changed (both runs have it, and it moved)."""
    found = [run.get(path) for run, path in zip(runs, paths, strict=True)]
    if all(m is None for m in found):
        return [], 0
    (old, new), problems = _headlines(design, paths, found, names)
    lines = [_line(f"{design.name}: {design.title}"), *problems]
    if design.headline is None:
        return [*lines, "  (the design names no headline numbers: its Design.headline is None)"], 0
    lines += _missing(found, paths, names)
    rows, same = _rows(old, new, show_all)
    lines += rows
    if same and not show_all:
        lines.append(f"  ({same} number{'s' if same != 1 else ''} the same; --all shows them)")
    moved = sum(  # a number that became NaN (no judgement scored) moved too: its change has no number
        old[label] is not None and new[label] is not None and cells(old[label], new[label])[2] != "="
        for label in old.keys() & new.keys()
    )
    return lines, moved


def design_table(
    design: Design[Any],
    path: str | Sequence[str],
    runs: Sequence[Mapping[str, Any]],
    names: Sequence[str],
    show_all: bool = True,
) -> list[str]:
    """The design's headline rows in both runs (show_all False: those that changed), each run's
    from its metrics file `path` (one for both, or each run's own); [] when neither run has it."""
    paths = [path, path] if isinstance(path, str) else list(path)
    return _table(design, paths, runs, names, show_all)[0]


def metrics_file(design: Design[Any], params: Mapping[str, Any]) -> str | None:
    """The design's metrics file in a run: its declared path with the run's own params.yaml values
    (as DVC resolved it for that run), a value the run's file lacks from the design's defaults;
    None where the design declares none, or its path names a param it does not have."""
    declared = [m for stage in design.stages for m in stage.metrics]
    if not declared:
        return None
    data = params.get("params.yaml", {})
    defaults = design.params.model_construct()

    def value(match: re.Match[str]) -> str:
        found = leaves(data).get(match[1], ABSENT)
        return str(param_value(defaults, match[1]) if found is ABSENT else found)

    try:
        return Path(PARAM_REFERENCE.sub(value, declared[0])).as_posix()
    except (AttributeError, KeyError, TypeError):
        return None


def _argument(text: str) -> str:
    """`text` as a shell reads it back: as it is where it is plain (HEAD~1), else quoted."""
    if _PLAIN_ARG.fullmatch(text):
        return text
    return "'" + text.replace("'", "'\"'\"'") + "'"  # shlex.quote, but it leaves `=x` bare


def _is_folder(name: str) -> bool:
    """Whether `name` is a folder here (as `judgeloop diff` looks first); a name no path can be (too
    long, a NUL in it) is none."""
    try:
        return Path(name).is_dir()
    except (OSError, ValueError):
        return False


def _pointer(names: Sequence[str], judged: Sequence[str]) -> list[str]:
    """Where to ask whether a change exceeds noise: the `judgeloop diff` of the same two runs, whole
    (a command cut is no command) or, wider than the table, holding a character shown as its
    escape (pasted, the escape would be typed) or a right-to-left one, said in words. A run named
    as a folder here is one diff refuses as two runs (the folder and the revision:
    pipeline.tools.diff.runs): said so."""
    command = "judgeloop diff " + " ".join(map(_argument, names))
    command += f" --design {_argument(judged[0])}" if len(judged) == 1 else ""
    shown_command = shown(command, one_line=True)
    # Escaped, it is no longer that command; a right-to-left name would draw its arguments out of
    # order, and isolates (pipeline.llm.terminal.isolated) would be pasted into the shell with it.
    if shown_command != command or columns(shown_command) > WIDTH - 2 or isolated(command) != command:
        shown_command = "judgeloop diff A B, A and B the two runs above"
    folders = [name for name in names if name != WORKSPACE and _is_folder(name)]
    if folders:
        shown_command = (
            f"judgeloop diff, each run by its commit (`git rev-parse {_argument(folders[0])}`): "
            "a folder here has its name too, which diff refuses as two runs"
        )
    return [
        "whether a change exceeds the judge's noise (judgement by judgement, with tests):",
        f"  {_line(shown_command, WIDTH - 2)}",
    ]


def _runs_tables(
    names: Sequence[str],
    metrics: Sequence[Mapping[str, Any]],
    params: Sequence[Mapping[str, Any]],
    only: Sequence[str],
    show_all: bool,
) -> tuple[list[str], list[str]]:
    """Every design's table (its metrics file each run's own), and the designs whose numbers
    changed that `judgeloop diff` pairs judgement by judgement."""
    lines: list[str] = []
    judged: list[str] = []
    for design in designs():
        if only and design.name not in only:
            continue
        paths = [metrics_file(design, run) for run in params]
        if None in paths:
            continue
        table, changed = _table(design, [p for p in paths if p is not None], metrics, names, show_all)
        lines += table
        if changed and design.judgements is not None:
            judged.append(design.name)
    return lines, judged


def render(
    names: Sequence[str],
    metrics: Sequence[Mapping[str, Any]],
    params: Sequence[Mapping[str, Any]],
    only: Sequence[str] = (),
    show_all: bool = True,
) -> str:
    a, b = (isolated(_line(n, VALUE - 1)) for n in names)  # the header's cells: the runs' names
    half = (WIDTH - 3) // 2
    lines = [f"{isolated(_line(names[0], half))} → {isolated(_line(names[1], half))}"]
    changed = params_changes(params, names)
    lines += ["params that differ:", *changed] if changed else ["params: the same"]
    lines += ["", _row("", a, b, "change")]
    tables, judged = _runs_tables(names, metrics, params, only, show_all)
    lines += tables or ["  (neither run has the metrics of any design)"]
    if judged:
        lines += ["", *_pointer(names, judged)]
    return "\n".join(lines) + "\n"


@click.command()
@click.argument("runs", nargs=-1, metavar="[A] [B]")
@click.option("--design", "only", multiple=True, help="Only this design's numbers (repeatable).")
@click.option("--all", "show_all", is_flag=True, help="Every headline number, the unchanged ones too.")
def compare(runs: tuple[str, ...], only: tuple[str, ...], show_all: bool) -> None:
    """Two runs side by side: each design's headline numbers that changed (--all: every one).

    A run is a commit, branch or tag (HEAD, HEAD~1, main), a DVC experiment's name, or
    `workspace`. With no run, the last commit against the workspace; with one, it against the
    workspace. The params that differ between the two are listed above the numbers; whether a
    change exceeds the judge's own noise is `judgeloop diff`'s (the same two runs).

    \b
    Examples:
      judgeloop compare                    what your uncommitted run changed
      judgeloop compare HEAD~1 HEAD        what the last commit changed
      judgeloop exp -S refine.threshold=2 && judgeloop compare
      judgeloop compare exp-1a2b3 exp-4c5d6   two experiments (names from `dvc exp show`)
      judgeloop compare HEAD~1 --design paper  one design's numbers
      judgeloop compare --all              the numbers that did not change too
    """
    if len(runs) > 2:
        raise click.UsageError("give at most two runs")
    if "" in runs:
        raise click.UsageError("a run's name is empty: give a commit, branch, tag, experiment or `workspace`")
    names = list(runs) if len(runs) == 2 else [runs[0] if runs else "HEAD", WORKSPACE]
    unknown = sorted(set(only) - {d.name for d in designs()})
    if unknown:
        raise click.BadParameter(f"no design {', '.join(unknown)}", param_hint="--design")
    if not Path(".dvc").is_dir():
        # Outside the project: said as every tool says it. In it, the workspace's params.yaml is
        # needed by no run but the workspace (each run's numbers are where its own params put them).
        require_params_file()
        raise JudgeloopError("not a DVC project here (no .dvc folder). Fix: run it in the project's folder.")
    metrics, params = read_runs(names)
    # Every text someone else wrote in it was shown before it was composed: its isolates are judgeloop's.
    table = render(names, [metrics[n] for n in names], [params[n] for n in names], only, show_all)
    echo(table, isolates=True, nl=False)
