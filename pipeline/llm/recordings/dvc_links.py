"""A recording's file that DVC checked out as a link into its own cache, read like a file.

With `cache.recordings_store: dvc` the recordings are DVC-cached outputs, and DVC checks each file
out as its cache type says (`dvc config cache.type`): a copy or a reflink (a file of its own), a
hard link (another name of the cache's file) or a symbolic link into the cache. A symbolic link in
a stage's folder is otherwise refused (pipeline.llm.recordings.stage_folders.refuse_linked): through
it a stage would read, or write, another stage's recording or any file of the machine. One that
DVC made is read as the file it leads to:

- it leads to a regular file inside the DVC cache that DVC itself uses for the project holding the
  folder (`dvc cache dir`: .dvc/cache, or the `cache.dir` of DVC's config, possibly outside the
  project), named as DVC names what it stores (files/md5/ab/cdef..., or ab/cdef... in DVC 2's
  layout): not merely somewhere a committed .dvc/config points at;
- its bytes are still verified as a file's are: hashed and checked against the folder's pin in
  dvc.lock, and each line against its digest, so the trust rests on the bytes, never on the link.

Writing never goes through it (nor through a hard link's other name): every recording's file is
replaced by a new file renamed over its name (pipeline.llm.files.atomic_write_chunks,
pipeline.llm.recordings.shards.write_shard), never written where it stands, so DVC's
content-addressed cache, and every checkout sharing it, is left as it was; the stage's out then
holds a file of its own, which DVC links again when it commits the stage.

Where DVC keeps its cache is read from DVC's own config (its four levels, as `dvc cache dir` reads
them), once per process and project for as long as the project's two config files are unchanged;
only when a link is met, so that a folder of plain files imports nothing of DVC.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import threading
from pathlib import Path

from pipeline.llm.files import path_under

DVC_DIR = ".dvc"
# What DVC names a file it stores: files/md5/<2 hex>/<30 hex> (DVC 3), or <2 hex>/<30 hex> (DVC 2).
_OBJECT = re.compile(r"(?:files/md5/)?[0-9a-f]{2}/[0-9a-f]{30}")
_LINK_ERRNOS = frozenset({errno.ELOOP, errno.EMLINK})  # what O_NOFOLLOW gives on a link (EMLINK: BSD)
_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CONFIGS = ("config", "config.local")  # the project's two levels of DVC's config (a pull request's)
_MAX_CONFIG_BYTES = 2**20  # a DVC config is a few lines; one past this is not read

_known: dict[tuple[str, tuple[tuple[int, int], ...]], str | None] = {}
_guard = threading.Lock()


def cache_file(link: Path) -> str | None:
    """The real path of the file the symbolic link `link` leads to, where that is a regular file
    DVC stored in its cache for the project holding `link` (see the module); None otherwise."""
    try:
        target = os.path.realpath(link)
        if not os.path.isfile(target):
            return None
    except (OSError, ValueError):
        return None
    return target if _in_cache(link, target) else None


def leads_into_cache(link: Path) -> bool:
    """Whether the symbolic link `link` leads to a name DVC gives what it stores in its cache for the
    project holding `link`, whether or not a file is there now (one `dvc gc` removed)."""
    try:
        return _in_cache(link, os.path.realpath(link))
    except (OSError, ValueError):
        return False


def _in_cache(link: Path, target: str) -> bool:
    """Whether `target`, the real path `link` leads to, is named as an object of DVC's cache for the
    project holding `link`."""
    try:
        cache = _cache_dir(os.path.realpath(os.path.dirname(os.path.abspath(link))))
    except (OSError, ValueError):
        return False
    if cache is None or not path_under(target, cache) or target == cache:
        return False
    return _OBJECT.fullmatch(os.path.relpath(target, cache).replace(os.sep, "/")) is not None


def open_file(path: Path, flags: int = os.O_RDONLY) -> int:
    """os.open(path, flags), never through a symbolic link (O_NOFOLLOW), except one into DVC's cache
    (cache_file), whose file is opened instead: OSError as os.open raises it otherwise (ELOOP for
    any other link)."""
    try:
        return os.open(path, flags | _NO_FOLLOW)
    except OSError as exc:
        if exc.errno not in _LINK_ERRNOS:
            raise
        target = cache_file(path)
        if target is None:
            raise
        return os.open(target, flags | _NO_FOLLOW)


def _project_dvc_dir(folder: str) -> str | None:
    """The .dvc folder of the DVC project holding `folder` (a real path), as DVC finds it where
    judgeloop runs: the nearest one at or above the working folder (every command and every stage
    runs from the project's root, where dvc.yaml is), if that project holds `folder`. A .dvc below
    that root (a committed recordings/.dvc, say) is one DVC itself takes for a subrepo's and leaves
    out of the project: never the one read, so a folder's own files cannot name the cache its links
    must lead into. A folder the working folder's project does not hold is read by the outermost
    .dvc above it, for the same reason (no folder a project commits can stand above its root)."""
    here = _nearest_dvc_dir(os.path.realpath(os.getcwd()))
    if here is not None and path_under(folder, os.path.dirname(here)):
        return here
    outermost = None
    while (found := _nearest_dvc_dir(folder)) is not None:
        outermost = found
        folder = os.path.dirname(os.path.dirname(found))  # the folder above its project's root
        if folder == os.path.dirname(found):
            break  # a .dvc at the file system's root
    return outermost


def _nearest_dvc_dir(folder: str) -> str | None:
    """The nearest .dvc folder at or above `folder`, as DVC's Repo.find_root looks for its root."""
    current = folder
    while True:
        candidate = os.path.join(current, DVC_DIR)
        if os.path.isdir(candidate):
            return candidate
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def _cache_dir(folder: str) -> str | None:
    """The real path of the DVC cache of the project holding `folder`, as `dvc cache dir` says it;
    None outside a DVC project, without DVC, or where DVC's config cannot be read."""
    dvc_dir = _project_dvc_dir(folder)
    if dvc_dir is None:
        return None
    key = (dvc_dir, tuple(_signature(os.path.join(dvc_dir, name)) for name in _CONFIGS))
    with _guard:
        if key not in _known:
            _known[key] = _read_cache_dir(dvc_dir)
        return _known[key]


def _signature(path: str) -> tuple[int, int]:
    try:
        status = os.stat(path)
    except OSError:
        return (-1, -1)
    return (status.st_mtime_ns, status.st_size)


def unreadable_config(dvc_dir: str) -> str | None:
    """What makes one of the project's DVC config files in `dvc_dir` unfit to be read, said (its
    path and why); None where each is absent or a regular file within the bound. What a pull request
    commits may be a link to a pipe (a read waits for good) or a device (/dev/zero: read until the
    memory runs out)."""
    for name in _CONFIGS:
        path = os.path.join(dvc_dir, name)
        try:
            status = os.stat(path)
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as exc:
            return f"{path}: cannot be looked at ({exc})"
        if not stat.S_ISREG(status.st_mode):
            return f"{path}: not a regular file (a pipe, a device or a folder), so never read"
        if status.st_size > _MAX_CONFIG_BYTES:
            return f"{path}: {status.st_size} bytes, past the {_MAX_CONFIG_BYTES} a DVC config may hold"
    return None


def _read_cache_dir(dvc_dir: str) -> str | None:
    try:  # DVC is judgeloop's own dependency; a project run without it has no DVC links to read
        from dvc.config import Config
        from dvc.fs import LocalFileSystem, get_cloud_fs
    except ImportError:
        return None
    if unreadable_config(dvc_dir) is not None:
        return None  # never read: DVC would wait on a pipe, or fill the memory from /dev/zero
    try:
        config = Config(dvc_dir)
        cache = config["cache"]
        # As DVC's CacheManager: a remote named as the local cache, else cache.dir, else .dvc/cache.
        if cache.get("local"):
            settings = {"name": cache["local"]}
        else:
            settings = {"url": cache.get("dir") or os.path.join(dvc_dir, "cache")}
        kind, _, path = get_cloud_fs(config, **settings)
    except Exception:
        # A committed config that DVC cannot read raises what DVC's parsers raise, not always a
        # DvcException (`dir = a, b`: TypeError; `cache = 1`: voluptuous' Invalid; `%(x)s`:
        # configobj's interpolation error): no cache is known, and the link is refused.
        return None
    if not (isinstance(kind, type) and issubclass(kind, LocalFileSystem)):
        return None
    return os.path.realpath(str(path))


def copy_cache_links_as_files(source: Path, copy: Path) -> None:
    """In `copy`, a copy of the folder `source` that kept its symbolic links as links (copytree's
    symlinks=True), each link that is one into DVC's cache in `source` (cache_file) replaced by a
    copy of its file: the copy reads it as the project does, where no DVC project holds the copy.
    Every other link stays a link (and is refused there as here)."""
    for root, folders, names in os.walk(copy):
        for name in names + folders:
            link = Path(root, name)
            if not link.is_symlink():
                continue
            target = cache_file(source / link.relative_to(copy))
            if target is not None:
                link.unlink()
                shutil.copyfile(target, link)
