"""docs/trust-model.md's table of every reader and its fuzz test names only tests that exist: each
`file.py::test_name` (a file under tests/fuzz/ unless it starts with tests/), and each `::test_name`
after it (the same file), is a test function defined in that file; each module (and name in
one) it names exists."""

from __future__ import annotations

import importlib
import re

from tests.fuzz.support import ROOT

SECTION = "## Every reader, and the fuzz test that reaches it"
_NAMED = re.compile(r"`((?:tests/)?[\w/]+\.py)?(::\w+)?`")
_MODULE = re.compile(r"`(pipeline(?:\.\w+)+)")


def _table() -> str:
    text = (ROOT / "docs" / "trust-model.md").read_text(encoding="utf-8")
    start = text.index(SECTION)
    return text[start : text.index("\n## ", start + len(SECTION))]


def _named_tests(table: str) -> list[tuple[str, str]]:
    named: list[tuple[str, str]] = []
    for row in table.splitlines():
        file = None
        for found in _NAMED.finditer(row):
            path, test = found.groups()
            if path is not None:
                file = path if path.startswith("tests/") else f"tests/fuzz/{path}"
            if test is not None and file is not None:
                named.append((file, test[2:]))
    return named


def test_every_fuzz_test_the_table_names_exists() -> None:
    named = _named_tests(_table())
    assert len(named) > 40
    missing = [
        f"{file}::{test}"
        for file, test in named
        if not (ROOT / file).is_file() or f"def {test}(" not in (ROOT / file).read_text(encoding="utf-8")
    ]
    assert not missing, missing


def _exists(dotted: str) -> bool:
    """A module, or a name inside one (a function, a class, a method), that exists."""
    parts = dotted.split(".")
    for n in range(len(parts), 1, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:n]))
        except ImportError:
            continue
        for name in parts[n:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


def test_every_module_and_name_the_table_names_exists() -> None:
    missing = [found.group(1) for found in _MODULE.finditer(_table()) if not _exists(found.group(1))]
    assert not missing, missing
