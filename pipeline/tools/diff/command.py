"""`judgeloop diff A B`: two runs judgement by judgement.

    judgeloop diff HEAD workspace                  what the uncommitted run changed
    judgeloop diff HEAD~1 HEAD --design paper      one design
    judgeloop diff main exp-1a2b3 --json           for scripts
    judgeloop diff A B --item 901 --metric coherence   the two calls, side by side
    judgeloop diff ../colleague/run workspace      a run's folder (its params.yaml, outputs, recordings)
    judgeloop diff A B --html diff-page            an offline page

Runs are what `judgeloop compare` takes (a commit, branch or tag, a DVC experiment's name,
`workspace`) or a run's folder. Each design names its judgement unit in the registry
(Design.judgements); the judgements are paired by (design, item, iteration, metric) and read from
the results files and the recordings alone: no model, no network.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from pipeline.errors import JudgeloopError
from pipeline.experiments.registry import designs
from pipeline.tools.diff.as_json import as_json
from pipeline.tools.diff.causes import cause_of
from pipeline.tools.diff.runs import WORKSPACE, Run, read_run
from pipeline.tools.diff.summary import RESAMPLES, SEED, summarise
from pipeline.tools.diff.text import UNITS, render, side_by_side, unrecorded_lines


def _item_view(a: Run, b: Run, item: str, metric: str | None, iteration: int | None) -> str:
    keys = sorted(
        key
        for key in a.judgements.keys() | b.judgements.keys()
        if key[1] == item
        and (metric is None or key[3] == metric)
        and (iteration is None or key[2] == iteration)
    )
    if not keys:
        have = sorted({key[1] for key in a.judgements.keys() | b.judgements.keys()})
        raise JudgeloopError(  # (its message escaped: the ids come from the runs' data files)
            f"no judgement of item {item!r}"
            + (f" on metric {metric!r}" if metric else "")
            + f" in either run. Items judged: {', '.join(have[:20]) or 'none'}."
        )
    parts = []
    for key in keys:
        old, new = a.judgements.get(key), b.judgements.get(key)
        if old is None or new is None:
            cause = "judged in one run only"
        elif old.score == new.score and old.passed == new.passed:
            cause = "unchanged"
        else:
            found = cause_of(old, new, a.calls, b.calls)
            cause = f"why: {found.text}"
        parts.append(side_by_side(old, new, (a.calls, b.calls), cause))
    return "\n".join(parts)


@click.command()
@click.argument("runs", nargs=-1, metavar="[A] [B]")
@click.option("--design", "only", multiple=True, help="Only this design's judgements (repeatable).")
@click.option("--item", help="Print this item's two calls side by side (prompt diff, reply diff, scores).")
@click.option("--metric", help="With --item: only this metric.")
@click.option("--iteration", type=int, help="With --item: only this iteration.")
@click.option("--json", "as_json_", is_flag=True, help="Everything as JSON (every changed judgement).")
@click.option(
    "--html",
    "html_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write an offline page to DIR.",
)
@click.option("--seed", type=int, default=SEED, show_default=True, help="The bootstrap's seed.")
@click.option(
    "--resamples", type=click.IntRange(100), default=RESAMPLES, show_default=True, help="Bootstrap resamples."
)
def diff(
    runs: tuple[str, ...],
    only: tuple[str, ...],
    item: str | None,
    metric: str | None,
    iteration: int | None,
    as_json_: bool,
    html_dir: Path | None,
    seed: int,
    resamples: int,
) -> None:
    """Two runs judgement by judgement: what changed, why, and whether it exceeds noise.

    A run is a commit, branch or tag, a DVC experiment's name, `workspace`, or the folder of a run
    (its params.yaml, outputs/ and recordings/; ./NAME where NAME is a revision too). With no run,
    HEAD against the workspace; with one, it against the workspace. Per design and metric: the
    pairs, the changed and flipped judgements, and why each judgement changed: its input, its
    prompt, the model, its sampling, or the reply alone; and for round 0 (judged before any
    revision) apart from the later rounds: the mean difference over items with its interval (exact
    up to 15 items), a paired test (Wilcoxon signed-rank on scores, exact McNemar on pass/fail), the
    change against the judge's repeat noise where a run asked several samples, and the agreement
    (exact, quadratic-weighted kappa).
    """
    if len(runs) > 2:
        raise click.UsageError("give at most two runs")
    if (metric is not None and item is None) or (iteration is not None and item is None):
        raise click.UsageError("--metric and --iteration select within --item ID")
    unknown = sorted(set(only) - {d.name for d in designs()})
    if unknown:
        raise click.BadParameter(f"no design {', '.join(unknown)}", param_hint="--design")
    names = list(runs) if len(runs) == 2 else [runs[0] if runs else "HEAD", WORKSPACE]
    project = Path.cwd()
    a, b = (read_run(name, project, only) for name in names)
    if item is not None:
        click.echo(_item_view(a, b, item, metric, iteration), nl=False)
        return
    rows, changes = summarise(a, b, seed=seed, resamples=resamples)
    unrecorded = (a.unrecorded, b.unrecorded)
    if html_dir is not None:
        from pipeline.tools.diff.page import write_page

        notes = [
            *unrecorded_lines(unrecorded),
            *(UNITS if any(r.tested for r in rows) else ()),
        ]
        written = write_page(html_dir, names, rows, changes, (a.calls, b.calls), notes)
        click.echo(f"wrote {written}", err=True)
    if as_json_:
        click.echo(json.dumps(as_json(names, rows, changes, unrecorded), indent=1, ensure_ascii=False))
    else:
        click.echo(render(names, rows, changes, unrecorded), nl=False)
