"""The cores the CPU quotas on a process's cgroups pay for (pipeline.reports.cpu_quota), read from a
fake /proc (the process's cgroups and mounts) whose mounts lead into a fake cgroup tree: cgroup v2
and v1, a quota on the process's own cgroup or on any above it (the smallest binds), a container's
mount of its own cgroup, and anything not understood refused (Unreadable: no fork)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from pipeline.reports import cpu_quota
from pipeline.reports.cpu_quota import Unreadable, cores_paid

V1 = "cpu,cpuacct"


@pytest.fixture
def tmp_path(short_tmp_path: Path) -> Path:
    """A folder whose path has no space (tests/conftest.py): the mountinfo lines here name it as it is."""
    return short_tmp_path


def fake_proc(tmp_path: Path, cgroups: dict[str, str], mounts: list[str]) -> Path:
    """A /proc whose process is in `cgroups` ({controllers: path}; "" for v2) and has `mounts`."""
    proc = tmp_path / "proc"
    (proc / "self" / "task" / "1").mkdir(parents=True)
    lines = [f"{n if c else 0}:{c}:{path}\n" for n, (c, path) in enumerate(cgroups.items(), 1)]
    (proc / "self" / "cgroup").write_text("".join(lines))
    (proc / "self" / "mountinfo").write_text(
        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n" + "".join(f"{m}\n" for m in mounts)
    )
    return proc


def v1_mount(point: Path, root: str = "/") -> str:
    return f"32 31 0:29 {root} {str(point).replace(' ', chr(92) + '040')} rw,nosuid - cgroup cgroup rw,{V1}"


def v2_mount(point: Path, root: str = "/") -> str:
    point_field = str(point).replace(" ", chr(92) + "040")  # as the kernel writes a space (v1_mount)
    return f"41 31 0:38 {root} {point_field} rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate"


def cgroup(folder: Path, **files: str) -> Path:
    """A cgroup's folder with its files (`cpu_max` for cpu.max, `quota`/`period` for v1's)."""
    names = {"cpu_max": "cpu.max", "quota": "cpu.cfs_quota_us", "period": "cpu.cfs_period_us"}
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / names[name]).write_text(text)
    return folder


def test_a_v2_quota_above_the_process_binds_it(tmp_path: Path) -> None:
    """The process's own cgroup sets none; one two levels up pays for two cores."""
    mount = tmp_path / "sys" / "fs" / "cgroup"
    cgroup(mount)  # the root: no cpu.max there
    cgroup(mount / "user.slice", cpu_max="max 100000\n")
    cgroup(mount / "user.slice" / "job", cpu_max="250000 100000\n")
    cgroup(mount / "user.slice" / "job" / "step", cpu_max="max 100000\n")
    proc = fake_proc(tmp_path, {"": "/user.slice/job/step"}, [v2_mount(mount)])
    assert cores_paid(proc) == 2


def test_the_smallest_quota_along_the_path_binds(tmp_path: Path) -> None:
    mount = tmp_path / "cg"
    cgroup(mount / "a", cpu_max="100000 100000\n")  # one core above
    cgroup(mount / "a" / "b", cpu_max="800000 100000\n")  # eight below it
    assert cores_paid(fake_proc(tmp_path, {"": "/a/b"}, [v2_mount(mount)])) == 1


def test_a_v1_quota_on_a_parent_cgroup_binds(tmp_path: Path) -> None:
    mount = tmp_path / "sys fs" / "cpu,cpuacct"  # a space: escaped in mountinfo
    cgroup(mount, quota="-1\n", period="100000\n")
    cgroup(mount / "docker", quota="150000\n", period="100000\n")
    cgroup(mount / "docker" / "abc", quota="-1\n", period="100000\n")
    proc = fake_proc(tmp_path, {"name=systemd": "/docker/abc", V1: "/docker/abc"}, [v1_mount(mount)])
    assert cores_paid(proc) == 1


def test_a_containers_mount_of_its_own_cgroup(tmp_path: Path) -> None:
    """Without a cgroup namespace a container sees its cgroup's path whole, and its mount shows that
    cgroup as the root: its quota is read at the mount point, nothing above it."""
    mount = cgroup(tmp_path / "cpu", quota="300000\n", period="100000\n")
    proc = fake_proc(tmp_path, {V1: "/docker/abc"}, [v1_mount(mount, root="/docker/abc")])
    assert cores_paid(proc) == 3


def test_the_mount_showing_most_of_the_path_is_read(tmp_path: Path) -> None:
    whole, part = tmp_path / "whole", tmp_path / "part"
    cgroup(whole / "a" / "b", cpu_max="max 100000\n")
    cgroup(whole / "a", cpu_max="100000 100000\n")
    cgroup(part, cpu_max="max 100000\n")  # a mount of /a/b alone does not show /a's quota
    mounts = [v2_mount(part, root="/a/b"), v2_mount(whole)]
    assert cores_paid(fake_proc(tmp_path, {"": "/a/b"}, mounts)) == 1


def test_both_hierarchies_read_the_smaller_binds(tmp_path: Path) -> None:
    """A hybrid host: v1's cpu hierarchy and v2's both mounted (the controller bound to one)."""
    v1, v2 = tmp_path / "cpu", tmp_path / "unified"
    cgroup(v1 / "s", quota="400000\n", period="100000\n")
    cgroup(v2 / "s", cpu_max="200000 100000\n")
    proc = fake_proc(tmp_path, {V1: "/s", "": "/s"}, [v1_mount(v1), v2_mount(v2)])
    assert cores_paid(proc) == 2


@pytest.mark.parametrize(
    ("cpu_max", "cores"),
    [("50000 100000\n", 1), ("150000 100000\n", 1), ("400000 100000\n", 4), ("max 100000\n", None)],
)
def test_a_quota_pays_for_its_whole_cores_at_least_one(
    tmp_path: Path, cpu_max: str, cores: int | None
) -> None:
    mount = cgroup(tmp_path / "cg", cpu_max=cpu_max)
    assert cores_paid(fake_proc(tmp_path, {"": "/"}, [v2_mount(mount)])) == cores


def test_no_quota_anywhere_or_no_cgroup_mounted(tmp_path: Path) -> None:
    v1, v2 = tmp_path / "cpu", tmp_path / "unified"
    cgroup(v1 / "s", quota="-1\n", period="100000\n")
    cgroup(v2 / "s")  # the cpu controller not enabled here: no cpu.max
    assert cores_paid(fake_proc(tmp_path / "1", {V1: "/s", "": "/s"}, [v1_mount(v1), v2_mount(v2)])) is None
    assert cores_paid(fake_proc(tmp_path / "2", {V1: "/s", "": "/s"}, [])) is None


def test_the_machines_own_is_read_without_failing() -> None:
    """Whatever this machine's cgroups hold, the reader answers without a traceback. A layout it
    does not understand is shown as a skip with the reason rather than failing the suite: there
    the page writer writes alone (slower, never wrong), which a machine's layout should not fail."""
    if not (cpu_quota.PROC / "self" / "mountinfo").exists():
        pytest.skip("no /proc")
    try:
        paid = cores_paid()
    except Unreadable as why:
        pytest.skip(f"this machine's cgroups are not understood, so pages are written by one process: {why}")
    assert paid is None or paid >= 1


def _refused(tmp_path: Path, name: str) -> Path:
    """Each way a cgroup's files can fail to say what quota binds the process."""
    mount = tmp_path / "cg"
    if name == "cpu.max empty":
        cgroup(mount / "s", cpu_max="")
    elif name == "cpu.max a word":
        cgroup(mount / "s", cpu_max="lots 100000\n")
    elif name == "cpu.max period 0":
        cgroup(mount / "s", cpu_max="100000 0\n")
    elif name == "cpu.max negative":
        cgroup(mount / "s", cpu_max="-100000 100000\n")
    elif name == "cpu.max three fields":
        cgroup(mount / "s", cpu_max="100000 100000 1\n")
    elif name == "cpu.max too long":
        cgroup(mount / "s", cpu_max="1" * 300 + " 100000\n")
    elif name == "cpu.max a folder":
        (mount / "s" / "cpu.max").mkdir(parents=True)
    elif name == "cpu.max not text":
        cgroup(mount / "s")
        (mount / "s" / "cpu.max").write_bytes(b"\xff\xfe 100000\n")
    elif name == "the cgroup's folder missing":
        cgroup(mount)
    else:
        cgroup(mount / "s", cpu_max="max 100000\n")
    return fake_proc(tmp_path, {"": "/s"}, [v2_mount(mount)])


@pytest.mark.parametrize(
    "name",
    [
        "cpu.max empty",
        "cpu.max a word",
        "cpu.max period 0",
        "cpu.max negative",
        "cpu.max three fields",
        "cpu.max too long",
        "cpu.max a folder",
        "cpu.max not text",
        "the cgroup's folder missing",
    ],
)
def test_a_quota_not_understood_is_unreadable(tmp_path: Path, name: str) -> None:
    with pytest.raises(Unreadable):
        cores_paid(_refused(tmp_path, name))


@pytest.mark.parametrize(
    ("quota", "period"),
    [("0\n", "100000\n"), ("lots\n", "100000\n"), ("100000\n", "0\n"), ("100000\n", None)],
)
def test_a_v1_quota_not_understood_is_unreadable(tmp_path: Path, quota: str, period: str | None) -> None:
    mount = cgroup(tmp_path / "cpu", quota=quota, **({} if period is None else {"period": period}))
    with pytest.raises(Unreadable):
        cores_paid(fake_proc(tmp_path, {V1: "/"}, [v1_mount(mount)]))


@pytest.mark.parametrize("part", ["cgroup", "mountinfo"])
def test_no_proc_is_unreadable(tmp_path: Path, part: str) -> None:
    proc = fake_proc(tmp_path, {"": "/"}, [v2_mount(cgroup(tmp_path / "cg"))])
    (proc / "self" / part).unlink()
    with pytest.raises(Unreadable):
        cores_paid(proc)


@pytest.mark.parametrize(
    ("cgroups", "mountinfo"),
    [
        ("0:/s\n", None),  # two fields
        ("0::s\n", None),  # not a path
        ("0::/s\n", "22 1 8:1 / / rw - ext4\n"),  # a mount line cut short
        ("0::/s\n", "22 1 8:1 / / rw\n"),  # no separator
        ("0::/s\n", "x" * (1 << 20) + "\n"),  # past the bound
        ("0::/../../elsewhere\n", None),  # outside the namespace's root
        ("4:cpu:/elsewhere/s\n", "32 31 0:29 /docker {cg} rw - cgroup cgroup rw,cpu\n"),  # outside the mount
    ],
)
def test_a_proc_not_understood_is_unreadable(tmp_path: Path, cgroups: str, mountinfo: str | None) -> None:
    mount = cgroup(tmp_path / "cg" / "s", cpu_max="max 100000\n").parent
    proc = fake_proc(tmp_path, {"": "/s"}, [v2_mount(mount)])
    (proc / "self" / "cgroup").write_text(cgroups)
    if mountinfo is not None:
        (proc / "self" / "mountinfo").write_text(mountinfo.replace("{cg}", str(mount)))
    with pytest.raises(Unreadable):
        cores_paid(proc)


class _Waited(Exception):
    pass


@pytest.mark.parametrize("where", ["cpu.max", "cgroup", "mountinfo"])
def test_a_file_that_is_not_a_plain_file_is_unreadable_at_once(tmp_path: Path, where: str) -> None:
    """A FIFO where a quota, the process's cgroups or its mounts are read (a fake tree; a cgroup
    mount shadowed by another mount at its point): refused at once, never an open that waits for a
    writer that never comes (here: failed by a guard after 5 s)."""
    mount = cgroup(tmp_path / "cg" / "s").parent
    proc = fake_proc(tmp_path, {"": "/s"}, [v2_mount(mount)])
    fifo = mount / "s" / "cpu.max" if where == "cpu.max" else proc / "self" / where
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)

    def waited(signum: int, frame: object) -> None:
        raise _Waited(f"{fifo}: still waiting after 5 s")

    before = signal.signal(signal.SIGALRM, waited)
    signal.setitimer(signal.ITIMER_REAL, 5)
    try:
        with pytest.raises(Unreadable):
            cores_paid(proc)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


def test_a_cgroup_mount_another_mount_covers_is_not_read_as_its_own(tmp_path: Path) -> None:
    """A container's own cgroup2 mount (its namespace's root: the container's cgroup, its quota
    one core) with the host's whole tree mounted over it at the same point (a bind of the host's
    /sys/fs/cgroup in a private cgroup namespace): the files at the point are the other mount's (here
    the host's root, no cpu.max), which do not say where the process's cgroup is: Unreadable (no
    fork), not the host's root read as the process's own cgroup (no quota: a fork)."""
    point = cgroup(tmp_path / "sys" / "fs" / "cgroup")  # what the point shows: the host's root
    own = f"41 31 0:38 / {point} rw,nosuid - cgroup2 cgroup2 rw"
    over = f"50 41 0:38 /../.. {point} rw,nosuid - cgroup2 cgroup2 rw"
    with pytest.raises(Unreadable):
        cores_paid(fake_proc(tmp_path, {"": "/"}, [own, over]))


def test_a_mount_covering_the_folder_a_cgroup_mount_stands_in(tmp_path: Path) -> None:
    """A v1 cpu hierarchy mounted in a tmpfs, then another tmpfs mounted over the first: the
    hierarchy's point shows the second's files (here: whatever the fake folder holds, a cgroup with
    no quota), not the hierarchy's, so it is not read as the process's; while a hierarchy mounted
    on top of the mount that covers the first is read."""
    base = tmp_path / "fs" / "cgroup"
    cgroup(base / "cpu" / "docker" / "abc", quota="-1\n", period="100000\n")
    tmpfs = f"31 30 0:28 / {base} rw - tmpfs tmpfs rw"
    own = f"32 31 0:29 / {base}/cpu rw - cgroup cgroup rw,cpu"
    over = f"60 31 0:40 / {base} rw - tmpfs tmpfs rw"
    with pytest.raises(Unreadable):
        cores_paid(fake_proc(tmp_path, {"cpu": "/docker/abc"}, [tmpfs, own, over]))
    (base / "cpu" / "docker" / "abc" / "cpu.cfs_quota_us").write_text("100000\n")
    on_top = f"32 60 0:29 / {base}/cpu rw - cgroup cgroup rw,cpu"
    again = tmp_path / "again"  # a /proc of its own
    assert cores_paid(fake_proc(again, {"cpu": "/docker/abc"}, [tmpfs, over, on_top])) == 1


def test_a_containers_usual_mounts_cover_nothing(tmp_path: Path) -> None:
    """Docker's mounts on cgroup v2 (a private cgroup namespace): the root's parent not listed,
    /sys and its cgroup2 mount, and the masked paths bound over files in /proc and /sys: the cgroup
    mount is read (its namespace's root: the container's cgroup, two cores)."""
    point = cgroup(tmp_path / "sys" / "fs" / "cgroup", cpu_max="200000 100000\n")
    mounts = [
        "1070 1052 0:324 / / rw,relatime master:1 - overlay overlay rw,lowerdir=/l,upperdir=/u",
        "1071 1070 0:327 / /proc rw,nosuid - proc proc rw",
        "1072 1070 0:328 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755",
        f"1075 1070 0:329 / {tmp_path}/sys ro,nosuid - sysfs sysfs ro",
        f"1076 1075 0:30 / {point} ro,nosuid - cgroup2 cgroup rw,nsdelegate",
        "1053 1071 0:327 /bus /proc/bus ro,nosuid - proc proc rw",
        "1054 1071 0:328 /null /proc/kcore rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755",
        f"1055 1075 0:331 / {tmp_path}/sys/firmware ro,relatime - tmpfs tmpfs ro",
    ]
    proc = fake_proc(tmp_path, {"": "/"}, mounts)
    (proc / "self" / "mountinfo").write_text("".join(f"{m}\n" for m in mounts))
    assert cores_paid(proc) == 2
