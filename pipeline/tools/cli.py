"""The `judgeloop` command: each behaviour is a named subcommand, defined in its own module.

    judgeloop audit     the recorded calls: prompts, replies, scores; `audit diff` between iterations
    judgeloop cache     stats, verify, gc, merge, seed, export of the local cache and the recordings
    judgeloop status    what the next `dvc repro` needs, and how many model calls it will make
    judgeloop check     does this clone reproduce? every stage replayed in one process, against dvc.lock
    judgeloop report    each design's report pages again, as its last stage writes them
    judgeloop calibrate a judge's scores against people's ratings
    judgeloop dvc-yaml  dvc.yaml, written from the designs' stage specs
    judgeloop batch     the calls a run needs, made by a batch job (vLLM, a batch API, Ray), in rounds

and the commands a design adds (its Design.commands, e.g. `judge-evaluate`, the RAG judge's). All
of them read what the pipeline writes (params.yaml, recordings/, the local cache, outputs/); none
keeps records of its own.
"""

from __future__ import annotations

import importlib
from collections import defaultdict
from pathlib import Path
from typing import Any

import click

from pipeline import __version__
from pipeline.errors import ConfigError, JudgeloopError
from pipeline.llm.terminal import echo, escape_logs

# The designs (pipeline.experiments: their params models, and pipeline.llm.settings's) are imported
# by the commands that use them, not with the CLI: `judgeloop repro` hands over to DVC, which runs
# each stage in a process of its own, so the CLI's process need not build them (about 0.25 s).

# judgeloop's own commands: name -> ("module:attribute" of the click command, its short help).
# Each is imported when it runs, never for another: `judgeloop diff` does not import calibrate's
# scipy, nor `judgeloop --help` any command (it lists these short helps, which
# tests/test_cli_imports.py holds equal to each command's own).
COMMANDS: dict[str, tuple[str, str]] = {
    "audit": (
        "pipeline.tools.audit.command:audit",
        "Show recorded calls: the exact request messages, the reply, and the score read from it.",
    ),
    "batch": (
        "pipeline.tools.batch.command:batch",
        "The calls the next `dvc repro` needs, made by a batch job (vLLM, a batch API, Ray) in rounds.",
    ),
    "cache": (
        "pipeline.tools.cache.command:cache",
        "The local call cache and the recordings: stats, verify, gc, merge, seed, export.",
    ),
    "calibrate": (
        "pipeline.tools.calibrate:calibrate",
        "How far a judge's scores agree with human ratings: Spearman, Kendall tau-b and Pearson at "
        "summary, system and global level with bootstrap intervals; Krippendorff's alpha.",
    ),
    "check": (
        "pipeline.tools.check:check",
        "Does this clone reproduce? Every stage replayed from the recordings, in one process.",
    ),
    "compare": (
        "pipeline.tools.compare:compare",
        "Two runs side by side: each design's headline numbers that changed (--all: every one).",
    ),
    "diff": (
        "pipeline.tools.diff.command:diff",
        "Two runs judgement by judgement: what changed, why, and whether it exceeds noise.",
    ),
    "dvc-yaml": (
        "pipeline.tools.dvc_yaml:dvc_yaml",
        "Write dvc.yaml from the designs' stage specs (it is generated, never edited).",
    ),
    "exp": (
        "pipeline.tools.dvc_run:exp",
        "Run an experiment: `dvc exp run`, and if it fails, put the workspace back as it was.",
    ),
    "repro": (
        "pipeline.tools.dvc_run:repro",
        "Run the pipeline: `dvc repro`, with judgeloop's environment first on the PATH.",
    ),
    "status": (
        "pipeline.tools.status.command:status",
        "Which calls the next `dvc repro` needs, how many are recorded, how many go to the model.",
    ),
    "variant": (
        "pipeline.tools.variant:variant",
        "The workspace's experiment with some params changed, recorded into FOLDER: a second run "
        "for `judgeloop diff workspace FOLDER`.",
    ),
}


def _command(ref: str, own: bool = False) -> click.Command:
    """The click command `ref` ("module:attribute") names: one of COMMANDS (`own`, imported as is),
    or a design's (through load_ref, which says what to fix in a wrong reference)."""
    if own:
        module, _, attribute = ref.partition(":")
        loaded = getattr(importlib.import_module(module), attribute)
    else:
        from pipeline.experiments.design import load_ref

        loaded = load_ref(ref)
    if not isinstance(loaded, click.Command):
        raise ConfigError(f"{ref} is not a click command")
    return loaded


class Judgeloop(click.Group):
    """judgeloop's own commands (COMMANDS, imported when one runs) and the designs' (likewise)."""

    def _design_commands(self) -> dict[str, str]:
        from pipeline.experiments.registry import designs

        found: dict[str, str] = {}
        for design in designs():
            for name, ref in design.commands.items():
                if name in self.commands or name in COMMANDS or name in found:
                    raise ConfigError(f"design {design.name} adds a command {name!r} that exists already")
                found[name] = ref
        return found

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *COMMANDS, *self._design_commands()])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in COMMANDS:
            command = _command(COMMANDS[cmd_name][0], own=True)
        if command is None and (ref := self._design_commands().get(cmd_name)) is not None:
            command = _command(ref)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands and their short helps, as click lists them, importing none of COMMANDS."""
        rows: list[tuple[str, str]] = []
        limit = formatter.width - 6 - max((len(name) for name in self.list_commands(ctx)), default=0)
        for name in self.list_commands(ctx):
            if name in COMMANDS and name not in self.commands:
                rows.append((name, click.Command(name, help=COMMANDS[name][1]).get_short_help_str(limit)))
                continue
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=Judgeloop)
@click.version_option(__version__, prog_name="judgeloop")
def main() -> None:
    """Reproducible, auditable LLM-as-a-judge experiments (see params.yaml and dvc.yaml).

    Run in the project's folder. Every command reads what the pipeline writes (params.yaml,
    recordings/, the local cache, outputs/); `repro` and `exp` run the pipeline.

    \b
    Examples:
      judgeloop repro                       run what changed (dvc repro)
      judgeloop repro --replay              every stage again from the recordings, no model
      judgeloop status                      what the next run will ask the model
      judgeloop audit --item 903 --metric accuracy
      judgeloop exp -S refine.threshold=2   an experiment; then `judgeloop compare`
      judgeloop report                      every design's pages and outputs/index.html
    """
    escape_logs()  # every warning a command prints (a server's words, a file's names) shown safely


def _written(paths: list[Path]) -> str:
    """The files written, a folder of many as its count."""
    by_folder: dict[Path, list[Path]] = defaultdict(list)
    for path in paths:
        by_folder[path.parent].append(path)
    parts = []
    for folder, files in by_folder.items():
        parts += [str(p) for p in files] if len(files) <= 3 else [f"{len(files)} files in {folder}/"]
    return ", ".join(parts)


@main.command()
@click.argument("names", metavar="[DESIGN]...", nargs=-1)
@click.option(
    "--figures",
    type=click.Path(file_okay=False, path_type=Path),
    help="Also draw the README's pictures into this folder (pipeline.svg, each design's plots).",
)
def report(names: tuple[str, ...], figures: Path | None) -> None:
    """Write the report pages of each design named (default: every design with a report whose
    outputs are there), as its last stage writes them, from its outputs and recordings; then the
    report index over every design, outputs/index.html.

    \b
    Examples:
      judgeloop report                     every design's pages, and the index
      judgeloop report rag                 one design's pages, and the index
      judgeloop report --figures docs      also docs/pipeline.svg and the plots as SVG files
    """
    from pipeline.experiments.design import load_ref
    from pipeline.experiments.params import require_params_file
    from pipeline.experiments.registry import designs, load_design
    from pipeline.tools.figures import write_figures
    from pipeline.tools.report_index import write_index

    require_params_file()
    chosen = [load_design(name) for name in names] or [d for d in designs() if d.report]
    for design in chosen:
        if design.report is None:
            raise click.ClickException(f"design {design.name} has no report")
        write: Any = load_ref(design.report)
        try:
            written: list[Path] = write(design.load_params())
        except JudgeloopError as exc:
            if names:
                raise
            echo(f"{design.name}: no report ({exc.message})", err=True)
            continue
        echo(f"{design.name}: wrote {_written(written)}")
    echo(f"index: wrote {write_index()}")
    if figures is not None:
        echo(f"figures: wrote {_written(write_figures(figures))}")


def program() -> None:
    """The judgeloop program (`judgeloop`, `python -m pipeline.tools.cli`): main, then out without the
    interpreter's teardown after a command that allows it (pipeline.tools.program_exit)."""
    from pipeline.tools.program_exit import leave

    try:
        main(prog_name="judgeloop")
    except SystemExit as done:
        leave(done)


if __name__ == "__main__":
    program()
