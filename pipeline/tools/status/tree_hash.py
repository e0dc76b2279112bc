"""A folder dependency's hash for `judgeloop status`, walked once without DVC's per-folder cost,
identical to the hash DVC computes, or not given at all (issue 33).

DVC hashes a folder by walking it (`dvc_data.hashfile.build`): for each subfolder its .dvcignore
trie is looked up and updated (the trie key, a `.dvcignore` and a `.dvc` check per subfolder) and
the state database is queried once. With a folder per interview (DAIC's layout) that was about
0.2 ms an item: 20 s of a status at a million calls, although no file's bytes are read.

Here the same hash is built from the same facts, with DVC's own pieces wherever the result
depends on them: one `os.scandir` walk; the ignore rules DVC's walk applies at the folder
(`DvcIgnoreFilter._get_trie_pattern`, the call DVC's walk makes first), matched per entry by DVC's
`DvcIgnorePatterns.matches` (or by `simple_ignore`, tested against it, where every rule is a plain
name or suffix); each file's md5 from DVC's state database by DVC's own look-up (`State.get_many`:
the inode, mtime and size rule, one query per 999 files); the listing digested by DVC's `Tree`.
Anything that would make DVC's walk differ from a plain one gives no answer (`None`), and the
caller asks DVC:
- a `.dvcignore` or `.dvc` entry anywhere in the folder, or `.git`/`.hg` (DVC's own ignores, a
  sub-repository, a .dvcignore read mid-walk or refused in a collected folder), and an ignored
  folder that holds a `.dvc` (DVC checks every subfolder, ignored or not, for a sub-repository);
- a symbolic link, a special file, a folder that cannot be read, a name that is not UTF-8 or
  holds a newline;
- a file the state database does not hold, or holds for other bytes (DVC would hash it and save
  its hash: that side effect stays DVC's), or under another hash name (legacy `md5-dos2unix`);
- no file at all, a folder outside the repository, a path DVC would not walk as it is given
  (not absolute, not normalized), a filesystem that answers for a name in either case, a hash
  other than md5, a filesystem or DVC that is not the local one this was checked against.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from typing import Any

from pipeline.tools.status.simple_ignore import simple_matcher

# Names DVC treats specially wherever they appear in a walked folder (its default ignores, its
# ignore file, a sub-repository's folder); compared casefolded, so a look-alike falls back too.
SPECIAL_NAMES = frozenset({".git", ".hg", ".dvc", ".dvcignore"})


class Unusual(Exception):
    """Something DVC's walk could treat otherwise than a plain walk: DVC computes the hash."""


def folder_hash_meta(output: Any) -> tuple[Any, Any] | None:
    """(meta, hash_info) as DVC's `Output._get_hash_meta` gives it for `output`'s folder, or None
    where only DVC may say (see the module's list)."""
    try:
        return _folder_hash_meta(output)
    except Unusual:
        return None


def _folder_hash_meta(output: Any) -> tuple[Any, Any]:
    path, top, pattern, state = _checked(output)
    infos = dict(_files(path, top, pattern))
    if not infos:
        raise Unusual("no file: DVC's own check of an empty or broken folder")
    from dvc_data.hashfile.meta import Meta
    from dvc_data.hashfile.tree import Tree

    tree = Tree()  # type: ignore[no-untyped-call]
    size = 0
    start = len(path) + 1
    for file, meta, hash_info in state.get_many(list(infos), output.fs, infos):
        if meta is None or hash_info is None or hash_info.name != "md5":
            raise Unusual(f"{file}: not in DVC's state database as it is now")
        tree.add(tuple(file[start:].split("/")), meta, hash_info)
        size += meta.size or 0
    tree.digest()
    return Meta(size=size, nfiles=len(tree), isdir=True), tree.hash_info


def _checked(output: Any) -> tuple[str, list[os.DirEntry[str]], Any, Any]:
    """The folder's path and listing, the ignore rules DVC applies in it and DVC's state database;
    Unusual where this output is not one this module may answer for."""
    from dvc_data.hashfile.state import State
    from dvc_objects.fs.local import LocalFileSystem

    if os.sep != "/" or output.hash_name != "md5" or output.use_cache:
        raise Unusual("not a dry-run md5 on a POSIX filesystem")
    fs, repo, ignore = output.fs, output.repo, output.dvcignore
    if not isinstance(fs, LocalFileSystem) or repo is None or ignore is None:
        raise Unusual("not the workspace's local filesystem")
    path: str = output.fs_path
    root: str = repo.root_dir
    if not isinstance(path, str) or not os.path.isabs(path) or os.path.normpath(path) != path:
        raise Unusual("a path DVC would not walk as given")
    if not path.startswith(root.rstrip("/") + "/"):
        raise Unusual("outside the repository")
    _plain_name(path)
    if any(part.casefold() in SPECIAL_NAMES for part in path[len(root) :].split("/")):
        raise Unusual("under a folder DVC treats specially")
    state = output.local_cache.state
    if not isinstance(state, State):
        raise Unusual("no state database")
    if not stat.S_ISDIR(_lstat(path).st_mode) or _answers_either_case(path):
        raise Unusual("not a plain folder on a case-sensitive filesystem")
    top = _scan(path)
    trie_pattern = getattr(ignore, "_get_trie_pattern", None)
    if trie_pattern is None:
        raise Unusual("a DVC without the ignore trie this was checked against")
    # The first call DVC's walk makes (DvcIgnoreFilter.__call__ on the folder and its subfolders).
    pattern = trie_pattern(path, dnames=[e.name for e in top if e.is_dir()], ignore_subrepos=True)
    return path, top, pattern, state


def _files(path: str, top: list[os.DirEntry[str]], pattern: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each file DVC's walk would hash under `path` (listed: `top`), with the facts its state
    look-up reads."""
    simple = simple_matcher(pattern, path) if pattern else None

    def ignored(root: str, name: str, is_dir: bool) -> bool:
        if not pattern:
            return False
        return simple(name, is_dir) if simple is not None else bool(pattern.matches(root, name, is_dir))

    folders = [path]
    while folders:
        root = folders.pop()
        for entry in top if root == path else _scan(root):
            name = entry.name
            _plain_name(name)
            if name.casefold() in SPECIAL_NAMES:
                raise Unusual(f"{entry.path}: a name DVC treats specially")
            if entry.is_symlink():
                raise Unusual(f"{entry.path}: a symbolic link")
            if entry.is_dir(follow_symlinks=False):
                if ignored(root, name, True):
                    if os.path.lexists(f"{entry.path}/.dvc"):
                        raise Unusual(f"{entry.path}: an ignored sub-repository")
                    continue
                folders.append(entry.path)
                continue
            if ignored(root, name, False):
                continue
            yield entry.path, _info(entry)


def _info(entry: os.DirEntry[str]) -> dict[str, Any]:
    """The fields of DVC's file info (dvc_data.fsutils._localfs_info) its state look-up reads."""
    try:
        facts = entry.stat(follow_symlinks=False)
    except OSError as error:
        raise Unusual(f"{entry.path}: {error}") from error
    if not stat.S_ISREG(facts.st_mode):
        raise Unusual(f"{entry.path}: not a regular file")
    return {
        "type": "file",
        "size": facts.st_size,
        "mode": facts.st_mode,
        "mtime": facts.st_mtime,
        "ino": facts.st_ino,
    }


def _scan(folder: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as entries:
            return list(entries)
    except OSError as error:
        raise Unusual(f"{folder}: {error}") from error


def _lstat(path: str) -> os.stat_result:
    try:
        return os.lstat(path)
    except OSError as error:
        raise Unusual(f"{path}: {error}") from error


def _plain_name(name: str) -> None:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError as error:
        raise Unusual(f"{name!r}: not UTF-8") from error
    if "\n" in name:
        # DVC matches its ignore rules by regexes on the path, whose `.` and `$` treat a newline
        # apart: under a folder named "\n", DVC hashes a `.tmp` that `*.tmp` should have ignored.
        raise Unusual(f"{name!r}: a newline, which DVC's ignore matching reads otherwise")


def _answers_either_case(path: str) -> bool:
    """The filesystem finds `path` under its name with the case swapped (a case-insensitive
    filesystem or folder): DVC's and this walk's names could then differ from the listing's."""
    parent, name = os.path.split(path)
    swapped = os.path.join(parent, name.swapcase())
    if swapped == path:
        return False
    try:
        other = os.stat(swapped)
    except OSError:
        return False
    here = os.stat(path)
    return (other.st_dev, other.st_ino) == (here.st_dev, here.st_ino)
