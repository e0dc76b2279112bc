"""`judgeloop cache merge`: a collaborator's recordings into ours (pipeline.tools.cache.merge), every
conflict shown with a diff of the two replies."""

from __future__ import annotations

import difflib
from pathlib import Path

import click

from pipeline.experiments.params import load_params
from pipeline.llm.recordings.pins import Pins
from pipeline.llm.terminal import echo, shown_line, text_lines
from pipeline.tools.cache.merge import Prefer, merge_into


def _reply_diff(ours: str, theirs: str) -> list[str]:
    """The two replies' unified diff, broken at "\\n" only and each line shown as itself (as `diff` does)."""
    lines = difflib.unified_diff(text_lines(ours), text_lines(theirs), "ours", "theirs", n=1, lineterm="")
    return [f"    {shown_line(line)}" for line in lines]


@click.command()
@click.argument("other", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--into",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The recordings folder merged into (default: cache.recordings).",
)
@click.option("--ours", "prefer", flag_value="ours", help="On a conflict keep our reply, and succeed.")
@click.option("--theirs", "prefer", flag_value="theirs", help="On a conflict take their reply, and succeed.")
@click.pass_context
def merge(ctx: click.Context, other: Path, into: Path | None, prefer: Prefer | None) -> None:
    """Take a collaborator's recordings (OTHER) into ours: the union of the calls, stage by stage.

    The same key in the same context is one call. The same key answered with a different reply on
    each side is a conflict: ours is kept, every conflict is listed, and the exit status is 1 unless
    --ours or --theirs says which to keep. Replies that differ only in metadata (timestamps,
    durations) are the same answer, not a conflict. The result is written sorted (deterministic).
    """
    target = into or Path(load_params().cache.recordings)
    result = merge_into(target, other, prefer or "ours")
    for stage in result.stages:
        total = stage.ours + stage.added
        echo(f"{stage.stage}: {stage.ours} ours + {stage.added} new from theirs = {total} calls")
    for conflict in result.conflicts:
        echo(f"conflict: key {conflict.key}")
        for side, call in (("ours", conflict.ours), ("theirs", conflict.theirs)):
            echo(f"  {side + ':':<7} {call.context.describe()}")
        ours, theirs = conflict.ours.record.reply, conflict.theirs.record.reply
        echo("\n".join(_reply_diff(ours.text, theirs.text)))
        if ours.done_reason != theirs.done_reason:
            echo(f"    done_reason: ours {ours.done_reason}, theirs {theirs.done_reason}")
    if result.took_theirs:
        echo(
            f"took theirs for {result.took_theirs} conflicting key(s); the local cache still holds ours: "
            "run `judgeloop cache seed --replace` to use the merged replies here"
        )
    pins = Pins(Path("."), target)
    for stage in result.stages:
        pin = pins.pin(target / stage.stage)
        if pin is not None and pins.problem(target / stage.stage) is not None:
            echo(
                f"note: {pin.path} no longer matches dvc.lock, and a stage refuses to read it until it is "
                f"re-locked: keep the merge with `{pin.relock()}`, or undo it with "
                f"`git checkout -- {pin.path}`"
            )
    if result.conflicts and prefer is None:
        echo(
            f"{len(result.conflicts)} conflicting call(s): kept ours. "
            "Re-run with --ours to accept that, or --theirs to take theirs.",
            err=True,
        )
        ctx.exit(1)
