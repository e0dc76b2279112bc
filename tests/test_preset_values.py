"""A preset's values reach params.yaml as the preset gives them (`exp --preset`): preset_args writes
each as DVC's `-S key=value`, which DVC reads with Hydra's override grammar (dvc.utils.hydra.apply_
overrides) and OmegaConf resolves. str() of a value is no Hydra spelling: a list's "\\n" became the
two characters backslash and n (a stop string never met), a `${oc.env:NAME}` wrote the environment
variable's value into params.yaml (and so dvc.lock and the experiment's commit), and a text holding a
comma became a sweep."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from dvc.utils.hydra import apply_overrides

from pipeline.tools.dvc_run import preset_args

PRESETS = [
    ('llm.options.stop: ["\\n\\nQuestion:", "###"]\n', ["llm", "options", "stop"], ["\n\nQuestion:", "###"]),
    ("llm.model: ${oc.env:JUDGELOOP_TEST_SECRET}\n", ["llm", "model"], "${oc.env:JUDGELOOP_TEST_SECRET}"),
    ('data.interviewer: "no"\n', ["data", "interviewer"], "no"),
    ("data.interviewer: 'Ellie, MD'\n", ["data", "interviewer"], "Ellie, MD"),
]


@pytest.mark.xfail(
    strict=True,
    reason="pipeline/tools/dvc_run.preset_args writes str() of each value, which DVC reads as a Hydra "
    "override (owned by exact-left2 this round: reported by redteam5, not mended)",
)
@pytest.mark.parametrize(("preset", "where", "value"), PRESETS)
def test_a_preset_s_value_reaches_params_yaml_as_given_or_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, preset: str, where: list[str], value: object
) -> None:
    monkeypatch.setenv("JUDGELOOP_TEST_SECRET", "hunter2")
    (tmp_path / "preset.yaml").write_text(preset, encoding="utf-8")
    params = tmp_path / "params.yaml"
    params.write_text(
        "llm:\n  model: m\n  options:\n    stop: []\ndata:\n  interviewer: Ellie\n", encoding="utf-8"
    )
    try:
        args = preset_args(tmp_path / "preset.yaml")
    except Exception:  # refused, naming the preset: nothing reaches params.yaml
        return
    overrides = args[1::2]
    apply_overrides(str(params), overrides)  # what `dvc exp run -S` does with each
    got = yaml.safe_load(params.read_text(encoding="utf-8"))  # as a stage reads it
    for key in where:
        got = got[key]
    assert got == value
    assert "hunter2" not in params.read_text(encoding="utf-8")
