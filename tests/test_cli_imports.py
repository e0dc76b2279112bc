"""The `judgeloop` command imports what the subcommand run uses, and no more: importing the CLI, or
asking for its help, imports no command's heavy dependencies (numpy for `calibrate`, jinja,
DVC's API), and `judgeloop diff` none that the diff does not use. Each is checked in a fresh
interpreter, where nothing is imported yet."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest

from pipeline.tools.cli import COMMANDS, main
from tests.conftest import ROOT

HEAVY = ("scipy", "numpy", "jinja2", "dvc", "matplotlib", "pandas", "httpx", "llama_cpp")


def imported_after(code: str) -> set[str]:
    """The top-level packages of HEAVY that a fresh interpreter has imported after `code`."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout.strip().splitlines()[-1])) & set(HEAVY)


def test_importing_the_cli_imports_no_heavy_dependency() -> None:
    assert imported_after("import pipeline.tools.cli") == set()


def test_the_help_imports_no_command() -> None:
    code = (
        "from click.testing import CliRunner\nfrom pipeline.tools.cli import main\n"
        "assert CliRunner().invoke(main, ['--help']).exit_code == 0"
    )
    assert imported_after(code) == set()


def test_diff_imports_neither_scipy_nor_the_page_s_jinja() -> None:
    code = "import click\nfrom pipeline.tools.cli import main\nmain.get_command(click.Context(main), 'diff')"
    assert imported_after(code) <= {"numpy"}  # its statistics (pipeline.stats.paired)


def test_calibrate_still_gets_numpy_when_it_runs() -> None:
    """The probe can see an import: the command that needs numpy does import it."""
    code = (
        "import click\nfrom pipeline.tools.cli import main\n"
        "main.get_command(click.Context(main), 'calibrate')"
    )
    assert "numpy" in imported_after(code)


@pytest.mark.parametrize(("design", "stage"), [("summeval", "summeval_calibrate"), ("rag", "rag_aggregate")])
def test_a_report_stage_imports_no_scipy(design: str, stage: str) -> None:
    """Its bootstraps' statistics are computed without scipy (pipeline.stats.correlation): importing
    scipy.stats cost each of these stages about 0.5 s of a replay."""
    code = f"from stages.runner import load\nload({design!r}, {stage!r})"
    assert "scipy" not in imported_after(code)


def test_kendall_past_the_pairwise_limit_still_gets_scipy() -> None:
    code = (
        "import numpy as np\nfrom pipeline.stats.correlation import PAIRWISE_KENDALL_LIMIT, correlation\n"
        "x = np.arange(PAIRWISE_KENDALL_LIMIT + 1.0)\ncorrelation('kendall', x, x[::-1].copy())"
    )
    assert "scipy" in imported_after(code)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_listed_short_help_is_the_command_s_own(name: str) -> None:
    command = main.get_command(click.Context(main), name)
    assert command is not None and command.name == name
    assert command.get_short_help_str(limit=10**6) == COMMANDS[name][1]
