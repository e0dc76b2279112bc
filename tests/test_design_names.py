"""A design lives in one folder: outside pipeline/experiments/<design>/ and the registry, no module of
the library or the stage runner imports a design or names one (every tool iterates the registry)."""

from __future__ import annotations

import ast

from pipeline.experiments.registry import design_names
from tests.conftest import ROOT

EXPERIMENTS = ROOT / "pipeline" / "experiments"
# The registry names every design; the synthetic experiment (bench/million.py and the 10k-call test)
# drives the paper's stages in process with a fake backend, at sizes no design's own stages take.
ALLOWED = {EXPERIMENTS / "registry.py", ROOT / "pipeline" / "testing" / "synthetic.py"}


def _docstrings(tree: ast.AST) -> set[int]:
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef | ast.FunctionDef))]
    found = set()
    for node in nodes:
        body = getattr(node, "body", [])
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            found.add(id(body[0].value))
    return found


def violations(source: str, designs: list[str]) -> list[str]:
    """Where `source` imports or names one of `designs` (its docstrings, which may cite one, aside)."""
    packages = [f"pipeline.experiments.{name}" for name in designs]

    def of_a_design(module: str) -> bool:
        return any(module == p or module.startswith(p + ".") for p in packages)

    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: imports {a.name}" for a in node.names if of_a_design(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            found += [f"{node.lineno}: imports {m}" for m in modules if of_a_design(m)][:1]
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
            and (node.value in designs or of_a_design(node.value.partition(":")[0]))
        ):
            found.append(f"{node.lineno}: names {node.value!r}")
    return found


def test_no_module_outside_a_design_imports_or_names_one() -> None:
    designs = design_names()
    assert {"paper", "rag", "regen", "selection", "summeval"} <= set(designs)
    folders = [EXPERIMENTS / name for name in designs if (EXPERIMENTS / name).is_dir()]
    found = []
    for path in sorted([*(ROOT / "pipeline").rglob("*.py"), *(ROOT / "stages").rglob("*.py")]):
        if path in ALLOWED or any(path.is_relative_to(folder) for folder in folders):
            continue
        found += [
            f"{path.relative_to(ROOT)}:{v}" for v in violations(path.read_text(encoding="utf-8"), designs)
        ]
    assert not found, "outside its folder and the registry, a design is named:\n" + "\n".join(found)


def test_the_check_sees_an_import_and_a_name_but_not_a_docstring() -> None:
    source = '''"""Cites pipeline.experiments.paper in prose."""
import pipeline.experiments.rag.judge
from pipeline.experiments import selection
from pipeline.experiments.paper.aggregate import run
STAGE = "summeval"
REF = "pipeline.experiments.regen.aggregate:run"
'''
    found = violations(source, ["paper", "rag", "regen", "selection", "summeval"])
    assert found == [
        "2: imports pipeline.experiments.rag.judge",
        "3: imports pipeline.experiments.selection",
        "4: imports pipeline.experiments.paper.aggregate",
        "5: names 'summeval'",
        "6: names 'pipeline.experiments.regen.aggregate:run'",
    ]
