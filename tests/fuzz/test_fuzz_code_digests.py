"""Fuzzing the code stage's readers (pipeline.tools.code_digests): stages/code/imports.json, which
whoever commits may write, as the code stage, `judgeloop status` and the pre-flight read it, and a
stage's digest as status reads it. The property of tests/fuzz/support.py, and: every file named for
hashing is a path inside the project, a digest is written only in stages/code/, and nothing is
written beside the project (the sandbox fixture)."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from hypothesis import given

from pipeline.tools import code_digests
from tests.fuzz.support import clear_or_correct, committed, edited_or_swapped, fuzz, inputs

IMPORTS = committed(code_digests.IMPORTS)
DIGEST = committed(code_digests.digest_path("judge"))
FIRST = b'"pipeline/__init__.py"'
ODD_PATHS = [
    b'"/etc/passwd"',
    b'"../outside.py"',
    b'"pipeline/../../outside.py"',
    b'"pipeline/\\u0000.py"',
    b'"pipeline\\\\x.py"',
    b'""',
    b'"pipeline/__init__.py\\u200b"',
    b'"pipeline/\\u2028.py"',
    b"null",
    b"[]",
]


def _written(project: Path) -> set[Path]:
    return {p for p in project.rglob("*") if p.is_file()}


@fuzz
@given(data=edited_or_swapped(IMPORTS, FIRST, ODD_PATHS))
def test_imports_json_as_the_code_stage_and_status_read_it(sandbox: Path, data: bytes) -> None:
    folder = sandbox / code_digests.FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    (sandbox / code_digests.IMPORTS).write_bytes(data)
    (sandbox / "pipeline").mkdir(exist_ok=True)
    (sandbox / "pipeline" / "__init__.py").write_bytes(b"")
    imports = clear_or_correct(lambda: code_digests.read_imports(sandbox))
    if isinstance(imports, dict):
        for files in imports.values():
            for name in files:
                pure = PurePosixPath(name)
                assert not pure.is_absolute() and ".." not in pure.parts and "\0" not in name, name
    before = _written(sandbox)
    clear_or_correct(lambda: code_digests.write_digests(sandbox))
    assert all(p.parent == folder for p in _written(sandbox) - before), "a digest written elsewhere"
    clear_or_correct(lambda: code_digests.pending(sandbox))


@fuzz
@given(data=inputs(DIGEST))
def test_a_stage_digest_as_status_reads_it(sandbox: Path, data: bytes) -> None:
    folder = sandbox / code_digests.FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    (sandbox / code_digests.IMPORTS).write_bytes(IMPORTS)
    clear_or_correct(lambda: code_digests.changed_files(sandbox, "judge", data))
    (sandbox / code_digests.digest_path("judge")).write_bytes(data)
    clear_or_correct(lambda: code_digests.pending(sandbox))
