"""A preset's number that YAML 1.1 and DVC's YAML 1.2 read apart. params.yaml's reader refuses
`seed: 010` (8 to PyYAML, 10 to DVC; pipeline.llm.yaml_scalars.read_apart), and so do `variant -S`
and `judgeloop exp --preset` (pipeline.tools.preset_values): a preset written for DVC's reading (10)
would otherwise run, and be recorded, with 8. Found by review17; mended by preset-values."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from pipeline.tools.dvc_run import preset_args


@pytest.mark.parametrize("number", ["010", "1:30", "-0_7_7"])
def test_a_preset_number_yaml_1_1_and_dvc_read_apart_is_refused(tmp_path: Path, number: str) -> None:
    (tmp_path / "preset.yaml").write_text(f"llm.options.seed: {number}\n", encoding="utf-8")
    with pytest.raises(click.BadParameter):
        preset_args(tmp_path / "preset.yaml")
