"""A scalar that PyYAML's resolver takes for a number or a date its constructor then cannot make:
`0x_` and `0b_` (a hex or binary number with no digit: int('', 16)), `2026-02-30` (a date with no
such day), `!!int abc`, `!!bool maybe`, 5,000 digits. yaml.safe_load raised ValueError, KeyError or
AttributeError, no YAMLError,
so every reader's own handler of bad YAML was passed over: a traceback from every stage and tool for
a params.yaml holding `data.transcripts: 2026-02-30` (a folder named by a date, misspelt), and from
`judgeloop check`, the pins and `exp --preset` for such a dvc.lock, dvc.yaml or preset. Each is now
refused as YAML its readers cannot read, naming the line."""

from __future__ import annotations

import contextlib
from pathlib import Path

import click
import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from pipeline.experiments.params import load_params
from pipeline.llm.bounds import check_yaml
from pipeline.llm.recordings.pins import Pins
from pipeline.llm.recordings.store import configured_store, pinned_folders
from pipeline.tools.check import read_lock
from pipeline.tools.dvc_run import preset_args
from pipeline.tools.preflight import llm_stages

UNMADE = [
    "0x_",
    "-0b__",
    "2026-02-30",
    "0000-01-01",
    "2026-01-01 25:00:00",
    "1" * 5000,  # past Python's int conversion limit (4,300 digits)
    "!!int abc",
    "!!int ''",
    "!!bool maybe",
    "!!float x",
    "!!timestamp x",
]


@pytest.mark.parametrize("value", UNMADE)
def test_a_scalar_pyyaml_cannot_make_is_refused_in_params_naming_its_line(tmp_path: Path, value: str) -> None:
    (tmp_path / "params.yaml").write_text(f"data:\n  limit: 3\n  transcripts: {value}\n")
    with pytest.raises(click.ClickException, match=r"params\.yaml:3: not valid YAML"):
        load_params(tmp_path / "params.yaml", environ={})
    assert configured_store(tmp_path) == "git"  # unreadable: the default, as for any bad YAML


@pytest.mark.parametrize("value", UNMADE)
def test_a_scalar_pyyaml_cannot_make_is_refused_by_the_lock_s_and_the_tools_readers(
    tmp_path: Path, value: str
) -> None:
    (tmp_path / "recordings" / "judge").mkdir(parents=True)
    (tmp_path / "dvc.lock").write_text(f"schema: '2.0'\nstages:\n  judge:\n    cmd: {value}\n")
    with pytest.raises(click.ClickException, match=r"dvc\.lock: not readable YAML .*line 4"):
        Pins(tmp_path, tmp_path / "recordings").problem(tmp_path / "recordings" / "judge")
    with pytest.raises(click.ClickException, match=r"dvc\.lock"):
        read_lock(tmp_path)
    assert pinned_folders(tmp_path, tmp_path / "recordings") == {}
    (tmp_path / "dvc.yaml").write_text(f"stages:\n  judge:\n    cmd: {value}\n")
    assert llm_stages(tmp_path) == set()  # unreadable: the probe then asks every server
    (tmp_path / "preset.yaml").write_text(f"llm.model: {value}\n")
    with pytest.raises(click.BadParameter, match="line 1"):
        preset_args(tmp_path / "preset.yaml")


@given(st.text(alphabet="0123456789_:.-+xbeEoT Z!abcdfilnrstu'", max_size=24))
@example("0x_")
@example("2026-1-1 1:00:00+99:00")
@example("!!int _")
def test_a_scalar_check_yaml_passes_is_one_pyyaml_makes(text: str) -> None:
    document = f"v: {text}\n"
    try:
        check_yaml(document)
    except yaml.YAMLError:
        return
    with contextlib.suppress(yaml.YAMLError):
        yaml.safe_load(document)  # anything but a YAMLError here was a traceback in every reader


def test_a_long_run_of_digits_is_refused_and_a_long_text_read() -> None:
    with pytest.raises(yaml.YAMLError, match="reads as an integer"):
        check_yaml("v: " + "7" * 4400 + "\n")
    check_yaml("v: " + "7" * 4000 + "x\n")
    assert yaml.safe_load("v: " + "7" * 4000 + "x\n")["v"].endswith("x")
