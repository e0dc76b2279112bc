"""`judgeloop compare`: two runs side by side, each design's headline numbers with the change.

    judgeloop compare                  the last commit (HEAD) against the workspace
    judgeloop compare REV              REV against the workspace
    judgeloop compare A B              A against B

A run is a git revision (a commit, a branch, a tag, HEAD~1) or a DVC experiment's name (`dvc exp
show` lists them); `workspace` is the files as they are. DVC reads each run's metrics and params
(dvc.repo.Repo.metrics/params.show, which resolve experiment names too); each design says which
of its numbers are the headline (its Design.headline, from the registry). The table fits 100
columns: a row a number that changed (`--all`: every number), the params that differ between the
two runs above it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from pipeline.errors import JudgeloopError
from pipeline.experiments.design import Design, Headline, Number, load_ref
from pipeline.experiments.params import require_params_file
from pipeline.experiments.registry import designs
from pipeline.llm.terminal import echo

WORKSPACE = "workspace"
WIDTH = 100
VALUE, DELTA = 12, 10  # column widths
LABEL = WIDTH - 2 - 2 * VALUE - DELTA  # the rows are indented by two


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, Mapping):
            flat |= _flatten(value, f"{prefix}{key}.")
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _by_rev(shown: Mapping[str, Any], revs: Sequence[str]) -> dict[str, dict[str, Any]]:
    """{rev: {file: its data}} from DVC's show(), every rev asked for (an unknown one is an error).
    A file DVC could not parse, or whose data is not a mapping, is read as empty, as DVC itself
    reads a metrics file of another shape."""
    out: dict[str, dict[str, Any]] = {}
    for rev in revs:
        # Asked for no revision (both runs the workspace), DVC names the workspace "".
        entry = shown.get(rev, shown.get("") if rev == WORKSPACE else None)
        if entry is None:
            raise JudgeloopError(
                f"no run named {rev!r}. Fix: a commit, branch or tag, or `dvc exp show`'s names."
            )
        if "error" in entry and not entry.get("data"):
            raise JudgeloopError(
                f"cannot read run {rev!r}: {entry['error']}. Fix: correct that file in the run "
                "(`dvc exp show` names it too), or compare another run."
            )
        files = entry.get("data", {})
        out[rev] = {
            path: data if isinstance(data := file.get("data", {}), Mapping) else {}
            for path, file in files.items()
        }
    return out


def read_runs(revs: Sequence[str]) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Each run's metrics files and params files, as DVC reads them."""
    from dvc.exceptions import DvcException
    from dvc.repo import Repo
    from dvc.scm import RevError

    asked = [r for r in revs if r != WORKSPACE]
    try:
        with Repo(".") as repo:
            metrics = repo.metrics.show(revs=asked or None, hide_workspace=False)
            params = repo.params.show(revs=asked or None, hide_workspace=False)
    except (DvcException, RevError) as exc:
        raise JudgeloopError(f"cannot read the runs {', '.join(revs)}: {exc}") from exc
    return _by_rev(metrics, revs), _by_rev(params, revs)


def _number(value: Number | None) -> str:
    if value is None:
        return "—"
    if isinstance(value, int):
        return str(value)
    text = f"{value:.4f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _delta(old: Number | None, new: Number | None) -> str:
    if old is None or new is None:
        return ""
    change = new - old
    if abs(change) < 5e-5:
        return "="
    return ("+" if change > 0 else "") + _number(round(change, 4) if isinstance(change, float) else change)


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _row(label: str, a: str, b: str, delta: str) -> str:
    return f"  {_fit(label, LABEL):<{LABEL}}{a:>{VALUE}}{b:>{VALUE}}{delta:>{DELTA}}".rstrip()


def _headline(design: Design[Any], metrics: Mapping[str, Any] | None, where: str) -> dict[str, Number | None]:
    """The design's headline numbers in `metrics` (the file `where`); JudgeloopError, naming it,
    where the file's numbers are not where the design writes them (a file someone edited)."""
    if metrics is None or design.headline is None:
        return {}
    try:
        rows: Headline = load_ref(design.headline)(metrics)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise JudgeloopError(
            f"{where} is not a metrics file of the {design.name} design ({type(exc).__name__}: {exc}). "
            "Fix: restore it from git, or re-run the design's stages (judgeloop repro)."
        ) from exc
    return dict(rows)


def _headlines(
    design: Design[Any], path: str, found: Sequence[Mapping[str, Any] | None], names: Sequence[str]
) -> tuple[list[dict[str, Number | None]], list[str]]:
    """Each run's headline numbers, and a line for each run whose metrics file cannot be read."""
    headlines, problems = [], []
    for metrics, name in zip(found, names, strict=True):
        try:
            headlines.append(_headline(design, metrics, f"{path} in {name}"))
        except JudgeloopError as exc:
            headlines.append({})
            problems.append(f"  ({_fit(exc.message, WIDTH - 4)})")
    return headlines, problems


def design_table(
    design: Design[Any],
    path: str,
    runs: Sequence[Mapping[str, Any]],
    names: Sequence[str],
    show_all: bool = True,
) -> list[str]:
    """The design's headline rows in both runs (show_all False: those that changed); [] when
    neither run has its metrics."""
    found = [run.get(path) for run in runs]
    if all(m is None for m in found):
        return []
    (old, new), problems = _headlines(design, path, found, names)
    lines = [f"{_fit(f'{design.name}: {design.title}', WIDTH)}", *problems]
    if any(m is None for m in found):
        missing = names[found.index(None)]
        lines.append(f"  (no {path} in {missing})")
    same = 0
    for label in dict.fromkeys([*old, *new]):
        a, b = old.get(label), new.get(label)
        if not show_all and (_delta(a, b) == "=" or (a is None and b is None)):
            same += 1
            continue
        lines.append(_row(label, _number(a), _number(b), _delta(a, b)))
    if same:
        lines.append(f"  ({same} number{'s' if same != 1 else ''} the same; --all shows them)")
    return lines


def params_changes(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """`file: key: old → new` for every params value that differs between the two runs."""
    old, new = (
        {f"{f}: {k}": v for f, data in run.items() for k, v in _flatten(data).items()} for run in runs
    )
    lines = []
    for key in sorted(old.keys() | new.keys()):
        a, b = old.get(key, "(absent)"), new.get(key, "(absent)")
        if a != b:
            lines.append("  " + _fit(f"{key.removeprefix('params.yaml: ')}: {a} → {b}", WIDTH - 2))
    return lines


def render(
    names: Sequence[str],
    metrics: Sequence[Mapping[str, Any]],
    params: Sequence[Mapping[str, Any]],
    only: Sequence[str] = (),
    show_all: bool = True,
) -> str:
    a, b = (_fit(n, VALUE - 1) for n in names)
    lines = [f"{names[0]} → {names[1]}"]
    changed = params_changes(params)
    lines += ["params that differ:", *changed] if changed else ["params: the same"]
    lines += ["", _row("", a, b, "change")]
    shown = 0
    for design in designs():
        if only and design.name not in only:
            continue
        try:
            design_params = design.load_params()
        except JudgeloopError:
            continue
        path = design.metrics_path(design_params)
        if path is None:
            continue
        table = design_table(design, path.as_posix(), metrics, names, show_all)
        if table:
            lines += table
            shown += 1
    if not shown:
        lines.append("  (neither run has the metrics of any design)")
    return "\n".join(lines) + "\n"


@click.command()
@click.argument("runs", nargs=-1, metavar="[A] [B]")
@click.option("--design", "only", multiple=True, help="Only this design's numbers (repeatable).")
@click.option("--all", "show_all", is_flag=True, help="Every headline number, the unchanged ones too.")
def compare(runs: tuple[str, ...], only: tuple[str, ...], show_all: bool) -> None:
    """Two runs side by side: each design's headline numbers that changed (--all: every one).

    A run is a commit, branch or tag (HEAD, HEAD~1, main), a DVC experiment's name, or
    `workspace`. With no run, the last commit against the workspace; with one, it against the
    workspace. The params that differ between the two are listed above the numbers.

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
    require_params_file()
    names = list(runs) if len(runs) == 2 else [runs[0] if runs else "HEAD", WORKSPACE]
    unknown = sorted(set(only) - {d.name for d in designs()})
    if unknown:
        raise click.BadParameter(f"no design {', '.join(unknown)}", param_hint="--design")
    if not Path(".dvc").is_dir():
        raise JudgeloopError("not a DVC project here (no .dvc folder). Fix: run it in the project's folder.")
    metrics, params = read_runs(names)
    echo(render(names, [metrics[n] for n in names], [params[n] for n in names], only, show_all), nl=False)
