"""The whole cores the CPU quotas on this process's cgroups pay for (Linux), for page_shares to know
whether a second process can pay.

A quota may be set on the process's own cgroup or on any cgroup above it, and the smallest along the
path binds, so every level is read, from the process's own up to the root its hierarchy is mounted
at: cgroup v2's `cpu.max` ("QUOTA PERIOD" or "max PERIOD") and cgroup v1's `cpu.cfs_quota_us` over
`cpu.cfs_period_us` (-1: none), both where both are mounted (a hybrid host binds the cpu controller
to one of them). Which cgroup the process is in comes from /proc/self/cgroup, where each hierarchy
is mounted (and which of its cgroups the mount shows as its root, in a container) from
/proc/self/mountinfo, through a mount no later mount covers (one over it shows its own files at
that point: a host's tree bound over a container's own cgroup mount). Every read is bounded, and of
a plain file only (never an open that waits). A file not understood, a level that is not there, or
a cgroup outside what its uncovered mounts show raises Unreadable: the caller then takes one core
(no fork), since an unread quota may be one core. A hierarchy not mounted, or a level with no quota
file (the root; a v2 cgroup whose cpu controller is not enabled) sets no quota: nothing here can
read one.
Quotas set above a container's cgroup namespace are not visible from inside it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

from pipeline.llm.files import read_regular

PROC = Path("/proc")
# /proc/self/mountinfo is a line a mount (a host with many mounts: some thousands of lines).
_MOUNTS_LIMIT = 1 << 20
_CGROUPS_LIMIT = 1 << 16
_QUOTA_LIMIT = 256
_ESCAPED = re.compile(r"\\([0-7]{3})")  # mountinfo's escapes: space, tab, newline and backslash


class Unreadable(Exception):
    """A cgroup file that should say what quota binds this process does not say it readably."""


class _Mount(NamedTuple):  # (a tuple: a host may list some thousands of mounts)
    version: int | None  # 1 (a v1 hierarchy with the cpu controller), 2, or None: another mount
    root: str  # the cgroup the mount shows at its mount point
    point: str
    id: str
    parent: str  # the mount it was made on (the root's own id, for a namespace's root)


def cores_paid(proc: Path = PROC) -> int | None:
    """The whole cores (at least one) the smallest CPU quota on this process's cgroups pays for,
    or None where none is set; raises Unreadable (see the module's docstring). `proc`: where
    /proc is (a test's own)."""
    cgroups = _cgroups(_read(proc / "self" / "cgroup", _CGROUPS_LIMIT))
    mounts = _mounts(_read(proc / "self" / "mountinfo", _MOUNTS_LIMIT))
    shown = _shown(mounts)
    paid = [
        cores
        for version, path in cgroups.items()
        for level in _levels(path, [m for m in mounts if m.version == version], shown)
        if (cores := _cores_at(level, version)) is not None
    ]
    return min(paid, default=None)


def _read(path: Path, limit: int) -> str:
    """The file's text, read only if a plain file (as /proc's and a cgroup's files are), opened
    without waiting (a FIFO's open would wait for a writer) and bounded (files.read_regular):
    anything else is not what it should be."""
    try:
        return read_regular(path, limit).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise Unreadable(f"{path}: {exc}") from exc


def _cgroups(text: str) -> dict[int, str]:
    """The process's cgroup in each hierarchy that can hold a CPU quota: {2: v2's, 1: v1 cpu's}
    (lines "ID:CONTROLLERS:PATH"; v2's is "0::PATH")."""
    found: dict[int, str] = {}
    for line in text.splitlines():
        fields = line.split(":", 2)
        if len(fields) != 3 or not fields[2].startswith("/"):
            raise Unreadable(f"/proc/self/cgroup: a line not understood: {line!r}")
        hierarchy, controllers, path = fields
        if hierarchy == "0" and not controllers:
            found[2] = path
        elif "cpu" in controllers.split(","):
            found[1] = path
    return found


def _mounts(text: str) -> list[_Mount]:
    """Every mount: the cgroup v2 mounts and the v1 mounts of the cpu controller by their version,
    the others for what may cover them (lines "ID PARENT MAJOR:MINOR ROOT POINT OPTIONS
    [OPTIONAL...] - TYPE SOURCE SUPER-OPTIONS")."""
    found: list[_Mount] = []
    for line in text.splitlines():
        fields = line.split(" ")
        try:
            dash = fields.index("-", 6)
        except ValueError:
            raise Unreadable(f"/proc/self/mountinfo: a line not understood: {line!r}") from None
        if len(fields) != dash + 4:
            raise Unreadable(f"/proc/self/mountinfo: a line not understood: {line!r}")
        kind, options = fields[dash + 1], fields[dash + 3].split(",")
        version = 2 if kind == "cgroup2" else 1 if kind == "cgroup" and "cpu" in options else None
        found.append(_Mount(version, _unescaped(fields[3]), _unescaped(fields[4]), fields[0], fields[1]))
    return found


def _shown(mounts: list[_Mount]) -> set[str]:
    """The ids of the cgroup mounts whose point shows their own files: none covered by a mount made
    later, on it at its point, or beside it or any mount it stands on, at or above that one's
    point (a mount made there before it would be under it: it would stand on that one)."""
    on: dict[str, list[_Mount]] = {}
    for mount in mounts:
        on.setdefault(mount.parent, []).append(mount)
    by_id = {mount.id: mount for mount in mounts}
    return {m.id for m in mounts if m.version is not None and not _covered(m, on, by_id)}


def _covered(mount: _Mount, on: dict[str, list[_Mount]], by_id: dict[str, _Mount]) -> bool:
    if any(other.point == mount.point for other in on.get(mount.id, ()) if other is not mount):
        return True
    link: _Mount | None = mount
    seen: set[str] = set()
    while link is not None and link.id not in seen:
        seen.add(link.id)
        above = _at_and_above(link.point)
        if any(other is not link and other.point in above for other in on[link.parent]):
            return True
        link = by_id.get(link.parent)
    return False


def _at_and_above(point: str) -> set[str]:
    """The point and every folder above it ("/a/b": "/a/b", "/a", "/")."""
    names = point.rstrip("/").split("/")
    return {"/".join(names[:depth]) or "/" for depth in range(1, len(names) + 1)}


def _at_or_above(point: str, other: str) -> bool:
    return other == point or other.startswith(f"{point.rstrip('/')}/")


def _unescaped(field: str) -> str:
    if "\\" not in field:
        return field
    return _ESCAPED.sub(lambda octal: chr(int(octal.group(1), 8)), field)


def _levels(path: str, mounts: list[_Mount], shown: set[str]) -> list[Path]:
    """The folders of the cgroup at `path` and of each above it, up to its mount's root (none where
    its hierarchy is not mounted), through a mount whose point shows its own files (`shown`)."""
    if not mounts:
        return []
    point, parts = _below_a_mount(path, [m for m in mounts if m.id in shown])
    levels = [point.joinpath(*parts[:depth]) for depth in range(len(parts), -1, -1)]
    for level in levels:
        if not level.is_dir():
            raise Unreadable(f"{level}: the cgroup's folder is not there")
    return levels


def _below_a_mount(path: str, mounts: list[_Mount]) -> tuple[Path, list[str]]:
    """The mount point that shows the most of the cgroups along `path`, and the names below it."""
    showing = [m for m in mounts if _at_or_above(m.root, path)]
    if not showing:
        raise Unreadable(f"cgroup {path} is outside every mount of its hierarchy that is not covered")
    mount = min(showing, key=lambda m: len(m.root))
    below = path[len(mount.root.rstrip("/")) :].strip("/")
    parts = below.split("/") if below else []
    if any(part in ("", ".", "..") for part in parts):
        raise Unreadable(f"cgroup {path} is outside what its mount shows")
    return Path(mount.point), parts


def _cores_at(level: Path, version: int) -> int | None:
    """The whole cores the quota of the cgroup at `level` pays for, None where it sets none."""
    if version == 2:
        found = _fields(level / "cpu.max", 2)
        if found is None or found[0] == "max":
            return None
        return _whole_cores(found[0], found[1], level / "cpu.max")
    quota = _fields(level / "cpu.cfs_quota_us", 1)
    if quota is None or quota == ["-1"]:
        return None
    period = _fields(level / "cpu.cfs_period_us", 1)
    if period is None:
        raise Unreadable(f"{level}: a CPU quota without its period")
    return _whole_cores(quota[0], period[0], level / "cpu.cfs_quota_us")


def _fields(path: Path, count: int) -> list[str] | None:
    """The file's `count` fields, None where there is no such file."""
    if not path.exists():
        return None
    fields = _read(path, _QUOTA_LIMIT).split()
    if len(fields) != count:
        raise Unreadable(f"{path}: {count} fields expected")
    return fields


def _whole_cores(quota: str, period: str, path: Path) -> int:
    if not (quota.isdecimal() and period.isdecimal() and int(quota) > 0 and int(period) > 0):
        raise Unreadable(f"{path}: a quota and a period in microseconds expected")
    return max(1, int(quota) // int(period))
