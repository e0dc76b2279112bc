"""Modules a cold stage's imports would now find elsewhere (stages/dvc_zygote.py): a fork runs the
modules its warm process found; a cold `python -m stages` looks each up afresh, and a file added
since (no file the warm process read changed) can come first: a package folder `x/` or an extension
module beside `x.py` (Python's finder takes an extension, then a package, then a module, in each
folder), or any of them in a folder earlier on sys.path than the module's (a `pydantic.py` or
`json.py` in the project, sys.path's first folder under `python -m`).

    noted(during_start)   each import folder's identity (sys.path's and every package's), as now
    shadowed(folders)     the first module a cold stage would find elsewhere now ('' where none)

A folder whose identity (inode, mtime, ctime: an entry added or removed changes both times, and a
change time cannot be put back) is as noted holds what it held; only where one changed are modules
looked up again, with the path hooks' own finders (Python's rules, not copied), in the changed
folders before each module's own. A folder changed while the warm process imported (its change
time after the start, as stages/bytecode.py's rule) is looked at on every request.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

Identity = tuple[int, int, int]
ALWAYS: Identity = (-1, -1, -1)  # changed while the warm process imported: looked at every time
Folders = dict[str, "Identity | None"]


def identity(path: str) -> Identity | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_ino, found.st_mtime_ns, found.st_ctime_ns


def _absolute(entry: str) -> str:
    return os.path.abspath(entry or os.curdir)


def _searched() -> list[str]:
    entries = [*sys.path]
    for module in list(sys.modules.values()):
        entries += _search_path(module)
    return sorted({_absolute(entry) for entry in entries})


def _search_path(package: object) -> list[str]:
    """A package's folders (a list, or a namespace package's _NamespacePath); [] for a module."""
    path = getattr(package, "__path__", None)
    try:
        return (
            []
            if path is None or isinstance(path, str)
            else [entry for entry in path if isinstance(entry, str)]
        )
    except TypeError:  # not iterable: no folders a finder searches
        return []


def noted(during_start: Callable[[int], bool]) -> Folders:
    """Every import folder (sys.path's and each imported package's) with its identity, or None where
    it is none; ALWAYS where it changed while the warm process imported (`during_start`)."""
    folders: Folders = {}
    for folder in _searched():
        found = identity(folder)
        folders[folder] = ALWAYS if found is not None and during_start(found[2]) else found
    return folders


def shadowed(folders: Folders) -> str:
    """The first imported module that a cold stage's import would find in another file now, and the
    changed folder where ('' where none)."""
    changed = {folder for folder, was in folders.items() if was == ALWAYS or identity(folder) != was}
    if not changed:
        return ""
    finders: dict[str, object] = {}
    for name, module in list(sys.modules.items()):
        spec = getattr(module, "__spec__", None)
        if spec is None or not spec.has_location or not isinstance(spec.origin, str):
            continue  # built in, frozen (found before any folder), or a namespace package
        parent = name.rpartition(".")[0]
        search = _search_path(sys.modules.get(parent)) if parent else sys.path
        if folder := _first_elsewhere(name, spec, search, changed, finders):
            return f"{folder} changed: {name} shadowed"
    return ""


def _first_elsewhere(
    name: str, spec: object, search: list[str], changed: set[str], finders: dict[str, object]
) -> str:
    """The changed folder, among those searched up to the module's own, where `name` is found now in
    another file than the one it was loaded from ('' where none)."""
    origin = str(getattr(spec, "origin", ""))
    own = os.path.dirname(origin)
    if getattr(spec, "submodule_search_locations", None) is not None:
        own = os.path.dirname(own)  # a package's __init__ lies in its own folder
    for entry in search:
        folder = _absolute(entry)
        if folder in changed:
            found = _found_in(folder, name, finders)
            if found is not None:
                return "" if found == origin else folder
        if folder == own:
            return ""
    return ""


def _found_in(folder: str, name: str, finders: dict[str, object]) -> str | None:
    """Where a finder made afresh by the path hooks finds `name` in `folder` (None: nothing, or a
    namespace portion, which a module elsewhere comes before)."""
    if folder not in finders:
        finders[folder] = _finder(folder)
    finder = finders[folder]
    if finder is None:
        return None
    try:
        spec = finder.find_spec(name)  # type: ignore[attr-defined]
    except (ImportError, OSError, ValueError):
        return None
    if spec is None or spec.loader is None:
        return None
    return str(spec.origin)


def _finder(folder: str) -> object:
    for hook in sys.path_hooks:
        try:
            return hook(folder)
        except ImportError:
            continue
    return None
