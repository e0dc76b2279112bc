"""The byte-code caches of a warm process's modules (stages/dvc_zygote.py): a fork runs the code its
warm process loaded; a cold `python -m stages` loads each module afresh, from its `.pyc` where
Python's loader takes that (its header matches the source: the source's mtime and size, or its hash;
an unchecked hash-based one always), else from the source. The source files are noted and compared
(dvc_zygote.changed); a `.pyc` replaced or removed under an unchanged `.py` (a `compileall
--invalidation-mode unchecked-hash`, a copy, a tool writing byte-code) can change what a cold stage
runs while no source changed, and DVC, which ignores byte-code (.dvcignore), records nothing.

    noted(began)            each module's `.pyc` as the warm process found it after its imports
    replaced(files, seen)   why a fork would not run the code a cold stage loads now ('' if it would)

A `.pyc` whose identity (device, inode, size, mtime, ctime) is as noted is the one it was. One that
differs is judged once per identity (`seen`): the code Python's loader would make now (that `.pyc`,
or the source where the loader refuses it or it is gone) against the code it made of the noted one,
as code objects compare (instructions, constants, names, line table) and by qualified names. The
same code: a fork runs what a cold stage would (a stage that wrote a faithful `.pyc` of the
unchanged source, as every cold stage may); other code, or a `.pyc` it cannot read: refused. A
`.pyc` written while the warm process imported (its change time after the start, less the source
check's margin) was written by an import of the source as it was then (stage 1's or this process's):
its code is taken as the source's.

The standard library only, and importlib's own checks of a `.pyc`'s header (_classify_pyc and the
two _validate_*), so that the loader's rules are not copied by hand.
"""

from __future__ import annotations

import _imp
import marshal
import os
import sys
from importlib import _bootstrap_external
from importlib.machinery import SourceFileLoader
from types import CodeType
from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

loader: Any = _bootstrap_external  # its private checks of a .pyc, which typeshed does not declare
Identity = tuple[int, int, int, int, int]
FROM_SOURCE = b""  # a .pyc written while the warm process imported: its code is the source's
# (module name, source path, .pyc path, the .pyc's identity or None, its bytes or FROM_SOURCE)
Cached = tuple[str, str, str, "Identity | None", bytes]
Files = list[Cached]


def identity(path: str) -> Identity | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError:
        return None


def noted(during_start: Callable[[int], bool]) -> Files:
    """Every source module's `.pyc` (its path, identity and bytes; None and FROM_SOURCE where there
    is none), as found now; one whose change time is `during_start` is taken as the source's code
    (see the module)."""
    files: Files = []
    for name, module in list(sys.modules.items()):
        spec = getattr(module, "__spec__", None)
        if spec is None or not isinstance(spec.loader, SourceFileLoader) or not spec.cached:
            continue
        found = identity(spec.cached)
        data = _read(spec.cached) if found is not None and not during_start(found[4]) else None
        files.append((name, str(spec.origin), spec.cached, found, FROM_SOURCE if data is None else data))
    return files


def code_of(name: str, source: str, cached: str, data: bytes | None) -> CodeType:
    """The code Python's loader makes of module `name` (SourceLoader.get_code) where its `.pyc` holds
    `data` (None: there is none; FROM_SOURCE: taken as the source's): the `.pyc`'s where its header
    is valid for the source, else the source compiled. Raises where the loader would fail (bad
    marshal data) or a file cannot be read."""
    if data:
        details = {"name": name, "path": cached}
        try:
            flags = loader._classify_pyc(data, name, details)
            if flags & 0b1:  # hash-based: checked against the source where the loader checks it
                mode = _imp.check_hash_based_pycs
                if mode != "never" and (flags & 0b10 or mode == "always"):
                    digest = _imp.source_hash(loader._RAW_MAGIC_NUMBER, _source(source))
                    loader._validate_hash_pyc(data, digest, name, details)
            else:
                found = os.stat(source)
                loader._validate_timestamp_pyc(data, int(found.st_mtime), found.st_size, name, details)
        except (ImportError, EOFError):
            pass  # the loader compiles the source
        else:
            code = marshal.loads(memoryview(data)[16:])
            if not isinstance(code, CodeType):
                raise ImportError(f"non-code object in {cached}")
            return code
    return compile(_source(source), source, "exec", dont_inherit=True)


def _source(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()


def replaced(files: Files, seen: dict[tuple[str, Identity | None], str]) -> str:
    """Why a fork would not run the code a cold stage's loader makes now of every noted module ('' if
    it would); the source files themselves are compared apart (and first). `seen`: the verdicts on
    `.pyc`s found changed, by their identity, so that each is judged once."""
    for name, source, cached, was, data in files:
        now = identity(cached)
        if now == was:
            continue
        verdict = seen.get((cached, now))
        if verdict is None:
            verdict = seen[(cached, now)] = _judged(name, source, cached, data)
        if verdict:
            return verdict
    return ""


def _judged(name: str, source: str, cached: str, data: bytes) -> str:
    new = _read(cached)
    if new is not None and new == data:
        return ""
    try:
        same = alike(code_of(name, source, cached, new), code_of(name, source, cached, data))
    except Exception as error:  # any failure: the loader's own, or an unreadable file
        return f"{cached} unreadable ({type(error).__name__})"
    return "" if same else f"{cached} replaced"


def alike(one: CodeType, other: CodeType) -> bool:
    """The same code: equal as code objects compare (instructions, constants and the code objects
    among them, names, line and exception tables), and what that comparison leaves out: the same
    qualified names throughout (a function's repr, a pickle's reference), the same kinds of local
    variable (a local, a cell, a free one: the names alone are compared) and the same stack size
    (which the interpreter trusts). The file name is the loader's to set (it names the source)."""
    if one != other or one.co_qualname != other.co_qualname or one.co_stacksize != other.co_stacksize:
        return False
    if (one.co_varnames, one.co_cellvars, one.co_freevars) != (
        other.co_varnames,
        other.co_cellvars,
        other.co_freevars,
    ):
        return False
    inner = [(a, b) for a, b in zip(one.co_consts, other.co_consts, strict=True) if isinstance(a, CodeType)]
    return all(isinstance(b, CodeType) and alike(a, b) for a, b in inner)
