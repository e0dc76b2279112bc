"""One design at a time: `--design NAME` on repro, exp and status, and a design's name where DVC
takes stage names (`judgeloop repro paper` runs the paper's stages, where DVC alone would say
"Stage 'paper' not found")."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

import click

from pipeline.experiments.registry import designs


def design_names() -> list[str]:
    return [d.name for d in designs()]


def stage_names() -> set[str]:
    return {s.name for d in designs() for s in d.stages}


def check_design(name: str) -> str:
    """`name` if a design has it, else a ClickException naming the nearest and every design."""
    known = design_names()
    if name in known:
        return name
    near = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    hint = f"; did you mean '{near[0]}'?" if near else ""
    raise click.ClickException(f"no design named '{name}'{hint} (the designs: {', '.join(known)})")


def design_stages(name: str) -> list[str]:
    """The design's stages, in order (DVC runs each one's upstream too: they are the design's)."""
    check_design(name)
    return next(list(s.name for s in d.stages) for d in designs() if d.name == name)


def expand_designs(args: Sequence[str], chosen: str | None = None) -> list[str]:
    """DVC's arguments with `--design NAME`'s stages added and each bare design name (one that is
    no stage's) replaced by its stages, saying so."""
    if not args and chosen is None:
        return []  # nothing to expand: no design is imported (`judgeloop repro` of everything)
    stages, names = stage_names(), set(design_names())
    out: list[str] = []
    for arg in args:
        if arg in names and arg not in stages:
            click.echo(f"'{arg}' is a design: running its stages ({', '.join(design_stages(arg))})", err=True)
            out += design_stages(arg)
        else:
            out.append(arg)
    if chosen is not None:
        out = design_stages(chosen) + out
    return out
