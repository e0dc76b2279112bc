"""A number in params.yaml means what dvc.lock records: judgeloop reads the file with PyYAML (YAML
1.1), DVC with ruamel.yaml (YAML 1.2), and dvc.lock records DVC's reading. `seed: 010` was seed 8 to
every stage (1.1's octal) and 10 in dvc.lock, and `top_k: 1:30` was 90 (1.1's base 60) while dvc.lock
recorded the text '1:30'; a later `seed: 10` was no change to DVC, so nothing reran, while the
stages would now compute another thing. A number the two read apart is refused, naming its line."""

from __future__ import annotations

import math
import string
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st
from ruamel.yaml import YAML

from pipeline.errors import ConfigError
from pipeline.experiments.params import load_params
from pipeline.llm.yaml_scalars import read_apart
from tests.conftest import ROOT as REPO_ROOT

PARAMS = (REPO_ROOT / "params.yaml").read_text(encoding="utf-8")
DVC_READS = YAML(typ="safe")  # how DVC reads params.yaml (dvc.utils.serialize._yaml.parse_yaml)

# (the committed line, its replacement, how PyYAML reads the value, how DVC does)
READ_APART = [
    ("    seed: 42", "    seed: 010", "8", "10"),
    ("    seed: 42", "    seed: 0_42", "34", "42"),
    ("    top_k: 20", "    top_k: 1:30", "90", "'1:30'"),
    ("  limit: 3                     # the first", "  limit: -010 # the first", "-8", "-10"),
    ("    num_ctx: 4096", "    num_ctx: 1:08:16", "4096", "'1:08:16'"),
    ("    temperature: 0.0", "    temperature: 0:30.5", "30.5", "'0:30.5'"),
]


def _write(tmp_path: Path, committed: str, replacement: str) -> tuple[Path, int]:
    assert PARAMS.count(committed) == 1, committed
    text = PARAMS.replace(committed, replacement)
    path = tmp_path / "params.yaml"
    path.write_text(text, encoding="utf-8")
    return path, next(n for n, line in enumerate(text.splitlines(), 1) if line.startswith(replacement))


@pytest.mark.parametrize(("committed", "replacement", "ours", "dvcs"), READ_APART)
def test_a_number_yaml_1_1_and_dvc_read_apart_is_refused_naming_its_line(
    tmp_path: Path, committed: str, replacement: str, ours: str, dvcs: str
) -> None:
    path, line = _write(tmp_path, committed, replacement)
    text = path.read_text(encoding="utf-8")
    key = replacement.strip().split(":")[0]
    section = "data" if key == "limit" else "llm"
    read = yaml.safe_load(text)[section]
    read = read[key] if key == "limit" else read["options"][key]
    assert repr(read) == ours  # what every stage computed with, before
    dvc = DVC_READS.load(text)[section]
    dvc = dvc[key] if key == "limit" else dvc["options"][key]
    assert repr(dvc) == dvcs  # what dvc.lock records
    with pytest.raises(ConfigError) as refused:
        load_params(path, environ={})
    message = str(refused.value)
    assert f"params.yaml:{line}:" in message
    assert ours in message and dvcs in message
    assert "Fix:" in message


@pytest.mark.parametrize(
    "value", ["10", "42", "0", "00", "07", "+42", "1_000", "0x1F", "0b101", "08", "0.5", "'010'"]
)
def test_a_number_both_read_alike_is_read_as_before(tmp_path: Path, value: str) -> None:
    path, _ = _write(tmp_path, "    seed: 42", f"    seed: {value}")
    expected = int(DVC_READS.load(f"v: {value}")["v"] if value != "'010'" else "010")
    if value == "0.5":
        with pytest.raises(ConfigError, match="valid integer"):  # refused for what it is, as before
            load_params(path, environ={})
        return
    assert load_params(path, environ={}).llm.options.seed == expected


_NUMBERISH = st.text(alphabet=string.digits[:3] + "789_:.+-eEoxb", min_size=1, max_size=8)


@given(_NUMBERISH)
@example("010")
@example("1:30")
@example("-0_7")
@example("0:0.")
def test_what_is_refused_is_exactly_where_pyyaml_and_dvc_read_a_number_apart(text: str) -> None:
    from pipeline.llm.yaml_scalars import read_apart  # (new with the mend)

    document = f"v: {text}\n"
    try:
        node = yaml.compose(document, Loader=yaml.SafeLoader)
        ours = yaml.safe_load(document)["v"]
    except yaml.YAMLError:
        return
    try:
        dvcs = DVC_READS.load(document)["v"]
    except Exception:  # ruamel refuses a few that PyYAML reads (`0b`): no number to compare
        return
    if not isinstance(ours, int | float) or isinstance(ours, bool):
        assert read_apart(node) == []  # only numbers are looked at (the rest: pydantic's checks)
        return
    apart = type(ours) is not type(dvcs) or ours != dvcs
    assert bool(read_apart(node)) == apart, (ours, dvcs)


# Where a scalar stands: a value, a key, in a flow or block sequence, in a flow mapping, before a
# comment, tagged. `{}` is the scalar; each reader's value of it is found by `_the_scalar`.
PLACES = [
    "v: {}\n",
    "{}: v\n",
    "? {}\n: v\n",
    "v: [{}, 1]\n",
    "v:\n  - {}\n",
    "v: {{k: {}}}\n",
    "v: {}  # a comment\n",
    "v: !!int {}\n",
    "v: !!float {}\n",
]


def _the_scalar(place: str, read: Any) -> Any:
    if not place.startswith("v:"):
        return next(iter(read))  # the key
    value = read["v"]
    return value[0] if isinstance(value, list) else value["k"] if isinstance(value, dict) else value


def _same(ours: Any, dvcs: Any) -> bool:
    both_nan = isinstance(ours, float) and isinstance(dvcs, float) and math.isnan(ours) and math.isnan(dvcs)
    return both_nan or (type(ours) is type(dvcs) and ours == dvcs)


@given(st.text(alphabet="0178_:.+-eEoxbnaif", min_size=1, max_size=7), st.sampled_from(PLACES))
@example(".inf", "v: {}\n")
@example("-.inf", "v: [{}, 1]\n")
@example(".nan", "{}: v\n")
@example("1e-3", "v: {}\n")
@example(".5", "v: {}\n")
@example("+1", "v:\n  - {}\n")
@example("1_000", "{}: v\n")
@example("0b1", "v: {}\n")
@example("-0", "v: {}\n")
@example("-0.0", "v: {}\n")
@example("010", "? {}\n: v\n")
@example("010", "v: {{k: {}}}\n")
@example("1:30", "v: !!int {}\n")
@example("010", "v: !!float {}\n")
@example("0_7", "v: {}  # a comment\n")
@example("_010", "v: !!int {}\n")  # 8 to PyYAML (its constructor drops the _), 10 to DVC
def test_a_number_is_refused_exactly_where_pyyaml_and_dvc_read_it_apart_wherever_it_stands(
    text: str, place: str
) -> None:
    document = place.format(text)
    try:
        node = yaml.compose(document, Loader=yaml.SafeLoader)
        ours = _the_scalar(place, yaml.safe_load(document))
        dvcs = _the_scalar(place, DVC_READS.load(document))
    except Exception:  # either refuses it (a ruamel error, an unmade scalar): nothing to compare
        return
    number = isinstance(ours, int | float) and not isinstance(ours, bool)
    assert bool(read_apart(node)) == (number and not _same(ours, dvcs)), (ours, dvcs)
