"""python -m stages.index: the report index over every design, outputs/index.html (dvc.yaml's last
stage; pipeline/tools/report_index.py)."""

import time

from stages import outside_the_environment

try:
    import click

    from pipeline.tools.report_index import write_index
except ModuleNotFoundError as missing:
    outside_the_environment(missing)

STAGE = "report_index"


@click.command()
def main() -> None:
    """Write outputs/index.html from every design's metrics and plots."""
    click.echo(f"{STAGE}: starting (it calls no model)", err=True)
    started = time.monotonic()
    write_index()
    click.echo(f"{STAGE}: done in {time.monotonic() - started:.1f} s", err=True)


if __name__ == "__main__":
    main()
