"""DVC's own share of a plain `dvc repro` (issue 31): its CPU between the stages, and how much of it
follows from the number of code deps in dvc.yaml. Two uses:

    JUDGELOOP_SHARED=/work/shared .venv/bin/python bench/dvc_share.py run --code-deps packages \
        -- --no-replay --trace
    .venv/bin/python bench/dvc_share.py split /tmp/scale/.judgeloop/profile-dvc.prof

`run` is bench/scale.py (its options after `--`) with each stage's code deps in the project's
dvc.yaml rewritten: `files` (as `judgeloop dvc-yaml` writes them: every file a stage imports, and
pipeline/llm whole), `packages` (each file dep under pipeline/<package>/ as that folder, under
pipeline/experiments/<design>/ as the design's folder, under stages/ as stages/) or `whole`
(pipeline/ and stages/). Only a sizing of what DVC does per dep entry (the open question of
package-folder code deps): `packages` and `whole` are not the information `files` is (a stage would
rerun for a change to a module it does not import). With --trace, scale.py prints the CPU of the
stage processes and of DVC, and each stage's "dvc after": from its process's exit to DVC's start of
the next stage.

`split` reads DVC's cProfile (bench/scale.py --profile --keep DIR: DIR/.judgeloop/profile-dvc.prof)
into the parts of DVC's work outside its stages' processes, inclusive seconds under the profiler
(which inflates them: compare them as shares of the total).
"""

from __future__ import annotations

import pstats
import re
import sys
from pathlib import Path
from typing import Any

import click

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# (file ending, function): DVC's work between its stages, inclusive under the profiler.
PARTS = {
    "all of `dvc repro` (its command)": ("dvc/cli/command.py", "do_run"),
    "waiting for the stages' processes": ("~", "<built-in method posix.waitpid>"),
    "dvc.lock rewritten after each stage": ("dvc/dvcfile.py", "_dump_lockfile"),
    "deps hashed and saved after each stage": ("dvc/stage/__init__.py", "save_deps"),
    "outs hashed and saved after each stage": ("dvc/stage/__init__.py", "save_outs"),
    "run-cache look-up before each stage (hashes every dep)": ("dvc/stage/cache.py", "restore"),
    "changed? before each stage": ("dvc/stage/__init__.py", "changed"),
    "params.yaml read for params deps": ("dvc/dependency/param.py", "read_params"),
    "the index of every stage (dvc.yaml, dvc.lock)": ("dvc/repo/__init__.py", "index"),
    "the stages to run collected": ("dvc/repo/reproduce.py", "collect_stages"),
}

CODE_DEP = re.compile(r"^(      - )((?:pipeline|stages)/\S+)$")


def folded(dep: str, mode: str) -> str:
    """A code dep of dvc.yaml as `mode` writes it."""
    parts = dep.split("/")
    if mode == "whole" or parts[0] == "stages":
        return parts[0]
    if mode == "packages" and len(parts) > 2:
        return "/".join(parts[: 3 if parts[1] == "experiments" and len(parts) > 3 else 2])
    return dep


def rewrite(text: str, mode: str) -> str:
    """dvc.yaml with each stage's code deps as `mode` writes them, each named once, in place."""
    lines: list[str] = []
    named: set[str] = set()
    for line in text.splitlines():
        if re.match(r"^  \w+:$", line):
            named = set()
        match = CODE_DEP.match(line)
        if match is None or mode == "files":
            lines.append(line)
            continue
        dep = folded(match.group(2), mode)
        if dep not in named:
            named.add(dep)
            lines.append(match.group(1) + dep)
    return "\n".join(lines) + "\n"


@click.group()
def main() -> None:
    """DVC's share of a plain `dvc repro` (issue 31)."""


@main.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option(
    "--code-deps", type=click.Choice(["files", "packages", "whole"]), default="files", show_default=True
)
@click.argument("scale_args", nargs=-1, type=click.UNPROCESSED)
def run(code_deps: str, scale_args: tuple[str, ...]) -> None:
    """bench/scale.py SCALE_ARGS, its project's code deps as --code-deps writes them."""
    from bench import scale  # its server and project, only for a run

    original = scale.project

    def project(root: Path, *args: Any, **kwargs: Any) -> None:
        original(root, *args, **kwargs)
        path = root / "dvc.yaml"
        path.write_text(rewrite(path.read_text(), code_deps))

    scale.project = project
    click.echo(f"code deps: {code_deps}")
    scale.main(args=list(scale_args), standalone_mode=False)


@main.command()
@click.argument("profile", type=click.Path(exists=True, path_type=Path))
def split(profile: Path) -> None:
    """DVC's work outside its stages, from its cProfile dump PROFILE."""
    rows = pstats.Stats(str(profile)).stats  # type: ignore[attr-defined]
    found = {
        name: sum(
            row[3] for (file, _, func), row in rows.items() if file.endswith(ending) and func == function
        )
        for name, (ending, function) in PARTS.items()
    }
    names = list(PARTS)
    own = found[names[0]] - found[names[1]]
    click.echo(f"{'part':56s} {'s (profiled)':>12s} {'share':>6s}")
    click.echo(f"{'DVC outside its stages (all less the wait)':56s} {own:12.3f} {1:6.0%}")
    for name in names[2:]:
        click.echo(f"{name:56s} {found[name]:12.3f} {found[name] / own:6.0%}")


if __name__ == "__main__":
    main()
