"""judgeloop's dvc.lock read-modify-write (pipeline.tools.dvc_lockfile) writes the very bytes DVC's
own modify_yaml writes, for a lock it wrote itself, a changed entry, an equal one, and a hand-edited
lock with a comment."""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dvc.utils.serialize import modify_yaml as dvc_modify_yaml
from dvc.utils.strictyaml import load as strictyaml_original  # DVC's own, unpatched

from pipeline.tools import dvc_lockfile
from tests.conftest import ROOT

Edit = Callable[[Any], None]


def _as_dvc_puts_it(entry: Any) -> Any:
    """A stage's entry as DVC's serialize.to_lockfile builds it: OrderedDicts, plain lists."""
    if isinstance(entry, dict):
        return OrderedDict((k, _as_dvc_puts_it(v)) for k, v in entry.items())
    if isinstance(entry, list):
        return [_as_dvc_puts_it(v) for v in entry]
    return entry


def _put(stage: str, change: Callable[[Any], None] | None = None) -> Edit:
    def edit(data: Any) -> None:
        entry = _as_dvc_puts_it(copy.deepcopy(dict(data["stages"][stage])))
        if change is not None:
            change(entry)
        data["stages"].update({stage: entry})

    return edit


def _bump(entry: Any) -> None:
    entry["deps"][0]["md5"] = "0" * 32


def _both(tmp_path: Path, start: str, edits: list[Edit]) -> tuple[list[str], list[str]]:
    ours, theirs = tmp_path / "ours.lock", tmp_path / "theirs.lock"
    ours.write_text(start, encoding="utf-8")
    theirs.write_text(start, encoding="utf-8")
    seen_ours, seen_theirs = [], []
    with dvc_lockfile.remembered_yaml():
        for edit in edits:
            with dvc_lockfile.modify_yaml(str(ours)) as data:
                edit(data)
            with dvc_modify_yaml(str(theirs)) as data:
                edit(data)
            seen_ours.append(ours.read_text(encoding="utf-8"))
            seen_theirs.append(theirs.read_text(encoding="utf-8"))
    return seen_ours, seen_theirs


def test_the_bytes_written_are_dvcs_for_equal_and_changed_entries(tmp_path: Path) -> None:
    lock = (ROOT / "dvc.lock").read_text(encoding="utf-8")
    edits = [_put("assess"), _put("judge", _bump), _put("refine"), _put("judge"), _put("assess", _bump)]
    ours, theirs = _both(tmp_path, lock, edits)
    assert ours == theirs
    assert ours[0] == lock and ours[1] != lock


def test_a_hand_edited_lock_keeps_its_comment_as_dvc_keeps_it(tmp_path: Path) -> None:
    lock = (ROOT / "dvc.lock").read_text(encoding="utf-8").replace("stages:\n", "stages:  # edited\n", 1)
    ours, theirs = _both(tmp_path, lock, [_put("judge", _bump), _put("refine")])
    assert ours == theirs
    assert "# edited" in ours[-1]


def test_only_plain_data_is_fingerprinted() -> None:
    assert dvc_lockfile.fingerprint({"a": [1, 1.0, "1", True, None]}) == dvc_lockfile.fingerprint(
        OrderedDict(a=[1, 1.0, "1", True, None])
    )
    assert dvc_lockfile.fingerprint([1]) != dvc_lockfile.fingerprint([1.0])
    assert dvc_lockfile.fingerprint((1,)) != dvc_lockfile.fingerprint((1,))


def test_a_reloaded_file_is_dvcs_data_afresh_and_a_changed_one_is_read_again(tmp_path: Path) -> None:
    from dvc.utils import strictyaml

    lock = tmp_path / "dvc.lock"
    lock.write_text((ROOT / "dvc.lock").read_text(encoding="utf-8"), encoding="utf-8")
    with dvc_lockfile.remembered_yaml():
        first, _ = strictyaml.load(str(lock))
        first["stages"].clear()  # a caller's change reaches no later load
        again, text = strictyaml.load(str(lock))
        assert again == strictyaml_original(str(lock))[0] and text == lock.read_text(encoding="utf-8")
        lock.write_text("schema: '2.0'\nstages: {}\n", encoding="utf-8")
        assert strictyaml.load(str(lock))[0] == {"schema": "2.0", "stages": {}}
    assert strictyaml.load is strictyaml_original
