"""`judgeloop variant DIR -S key=value` reads each value as YAML (yaml.safe_load), the one YAML reader
that check_yaml did not guard: `-S data.transcripts=2026-02-30` (a dated folder, misspelt) and
`-S llm.options.seed=0x_` were a ValueError's traceback, `-S llm.options.stop=[a` a YAMLError's, and
`-S llm.options.seed=010` became seed 8 (YAML 1.1's octal) where `judgeloop exp -S` and params.yaml's
reader give 10 or refuse it (pipeline.llm.yaml_scalars). Each is refused, naming the setting."""

from __future__ import annotations

from typing import Any

import click
import pytest

from pipeline.tools.variant import set_value

REFUSED = [
    ("2026-02-30", "reads as a date"),
    ("0x_", "reads as an integer"),
    ("!!bool maybe", "reads as a boolean"),
    ("[a", "not a YAML value"),
    ("010", "8 to judgeloop"),
    ("1:30", "90 to judgeloop"),
]


@pytest.mark.parametrize(("value", "said"), REFUSED)
def test_a_value_yaml_cannot_make_or_reads_apart_is_refused_naming_the_setting(value: str, said: str) -> None:
    params: dict[str, Any] = {"data": {"transcripts": "data/demo"}}
    with pytest.raises(click.BadParameter) as refused:
        set_value(params, "data.transcripts", value)
    message = refused.value.format_message()
    assert f"data.transcripts={value}" in message and said in message
    assert "Fix:" in message
    assert params == {"data": {"transcripts": "data/demo"}}  # nothing set


@pytest.mark.parametrize(
    ("value", "read"),
    [("3", 3), ("0.5", 0.5), ("'010'", "010"), ("[a, b]", ["a", "b"]), ("data/2026-02", "data/2026-02")],
)
def test_a_value_both_yamls_read_alike_is_set_as_read(value: str, read: Any) -> None:
    params: dict[str, Any] = {}
    set_value(params, "llm.options.x", value)
    assert params == {"llm": {"options": {"x": read}}}
