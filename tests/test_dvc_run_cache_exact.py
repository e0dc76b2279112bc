"""review15: judgeloop's run-cache look-up (pipeline.tools.dvc_run_cache) answers exactly as DVC's
`_can_hash` for every stage of a user's own dvc.yaml (persist or not, mixed outs, `cache: true`,
metrics, always_changed, a dependency that is missing or a broken link), and the patch is undone
whatever order threads leave it in."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from dvc.repo import Repo
from dvc.stage import cache

from pipeline.tools.dvc_run_cache import outputs_first

STAGES = {
    "ours": ("a.txt", "{o.txt: {cache: false, persist: true}}"),
    "plain": ("a.txt", "o.txt"),
    "cache_false": ("a.txt", "{o.txt: {cache: false}}"),
    "mixed": ("a.txt", "{o.txt: {persist: true}}, p.txt"),
    "mixed_other_order": ("a.txt", "p.txt, {o.txt: {persist: true}}"),
    "cache_true_persist": ("a.txt", "{o.txt: {cache: true, persist: true}}"),
    "a_folder": ("d", "{o.txt: {persist: true}}"),
    "missing_persist": ("a.txt, gone.txt", "{o.txt: {cache: false, persist: true}}"),
    "missing_plain": ("a.txt, gone.txt", "o.txt"),
    "broken_link_persist": ("broken", "{o.txt: {persist: true}}"),
}


def a_users_project(root: Path) -> Path:
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=root, check=True)
    (root / "a.txt").write_text("a\n")
    (root / "d").mkdir()
    (root / "d" / "x").write_text("x\n")
    os.symlink("nowhere", root / "broken")
    lines = ["stages:"]
    for name, (deps, outs) in STAGES.items():
        lines += [f"  {name}:", f"    cmd: cp a.txt {name}/o.txt", f"    wdir: {name}"]
        lines += [f"    deps: [{', '.join('../' + d for d in deps.split(', '))}]", f"    outs: [{outs}]"]
        (root / name).mkdir()
    lines += ["  always:", "    cmd: echo", "    deps: [a.txt]", "    outs: [{y.txt: {persist: true}}]"]
    lines += ["    always_changed: true", "  metric:", "    cmd: echo", "    deps: [a.txt]"]
    lines += ["    metrics: [{m.json: {cache: false, persist: true}}]"]
    (root / "dvc.yaml").write_text("\n".join(lines) + "\n")
    return root


def answer(can_hash: Callable[[Any], bool], stage: Any) -> object:
    try:
        return can_hash(stage)
    except Exception as exc:  # DVC's answer may be an error: it must be ours too
        return type(exc)


def test_every_stage_of_a_users_dvc_yaml_gets_dvc_s_own_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = a_users_project(tmp_path / "project")
    monkeypatch.chdir(root)
    with Repo(str(root)) as repo:
        stages = repo.index.stages
        dvc_s = {stage.name: answer(cache._can_hash, stage) for stage in stages}
        with outputs_first():
            ours = {stage.name: answer(cache._can_hash, stage) for stage in stages}
    assert len(ours) == len(STAGES) + 2
    assert dvc_s["missing_persist"] is FileNotFoundError  # (what the look-up is asked about below)
    assert ours == dvc_s


def test_the_patch_is_undone_whatever_order_threads_leave_it_in(monkeypatch: pytest.MonkeyPatch) -> None:
    dvc_s = cache._can_hash
    monkeypatch.setattr(cache, "_can_hash", dvc_s)  # put back for the other tests, should this fail
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        with outputs_first():
            first_in.set()
            second_in.wait(10)
        first_out.set()

    def second() -> None:
        first_in.wait(10)
        with outputs_first():
            second_in.set()
            first_out.wait(10)  # the first leaves before the second

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert cache._can_hash is dvc_s


def test_the_patch_is_undone_on_an_error() -> None:
    dvc_s = cache._can_hash
    with pytest.raises(KeyboardInterrupt), outputs_first():
        assert cache._can_hash is not dvc_s
        raise KeyboardInterrupt
    assert cache._can_hash is dvc_s


def test_every_stage_of_this_repository_gets_dvc_s_own_answer() -> None:
    with Repo(str(Path(__file__).resolve().parents[1])) as repo:
        stages = repo.index.stages
        dvc_s = {stage.addressing: answer(cache._can_hash, stage) for stage in stages}
        with outputs_first():
            ours = {stage.addressing: answer(cache._can_hash, stage) for stage in stages}
    assert len(ours) > 10 and set(ours.values()) == {False}  # every stage persist: never looked up
    assert ours == dvc_s
