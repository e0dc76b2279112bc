"""DVC reads dvc.yaml, dvc.lock and params.yaml with ruamel.yaml (typ="safe") at its start and before
every stage; ruamel.yaml.clib (a dependency, pyproject.toml) makes that its C loader, about 0.2 s
less a `dvc status` of the paper (bench/README.md, issue 31). The C loader must read the project's
files as the pure-Python one does, or DVC would see changed params and rerun stages."""

from __future__ import annotations

import importlib
import platform
from pathlib import Path

import pytest
from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(platform.python_implementation() != "CPython", reason="the C loader is CPython's")
def test_dvc_gets_the_c_loader() -> None:
    try:
        c_parser = importlib.import_module("_ruamel_yaml").CParser
    except ModuleNotFoundError:
        pytest.fail("ruamel.yaml.clib is not installed: `make install`")
    assert YAML(typ="safe").Parser is c_parser


@pytest.mark.parametrize("name", ["dvc.yaml", "dvc.lock", "params.yaml", "presets/real-model.yaml"])
def test_the_c_loader_reads_the_project_as_the_python_one(name: str) -> None:
    text = (ROOT / name).read_text(encoding="utf-8")
    fast, pure = YAML(typ="safe").load(text), YAML(typ="safe", pure=True).load(text)
    assert fast == pure
    assert repr(fast) == repr(pure)  # the same types too (1 and 1.0 and True compare equal)


def test_the_c_loader_resolves_scalars_as_the_python_one() -> None:
    # YAML 1.2 as ruamel reads it: `yes`, `on` and `0o17`-style values, dates and floats alike.
    text = "a: yes\nb: on\nc: 1e-3\nd: 0o17\ne: 017\nf: 2026-11-26\n"
    text += "g: .inf\nh: null\ni: ~\nj: '1'\nk: 1_000\nl: [1, 2.5, x]\nm: {n: 3}\n"
    fast, pure = YAML(typ="safe").load(text), YAML(typ="safe", pure=True).load(text)
    assert repr(fast) == repr(pure)
