"""Audit of one item in a sharded recording reads that item's lines through the tables of items the
writer keeps beside each shard of calls, not every shard whole (issue 33); a table that is missing,
edited, of another form, or that does not account for every byte of its shard is not used (the
shards are read whole, as before), and a recording written before the tables reads as it did."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pipeline.llm.recordings import item_reader, item_table, shards, stage_folders, stage_reader, stage_writer
from pipeline.llm.recordings.item_reader import read_items
from pipeline.llm.records import RecordedCall
from pipeline.tools.cli import main
from tests.test_recordings_shards import _calls, _shard_files

Found = list[tuple[Path, int, RecordedCall]]


def _recorded(tmp_path: Path, n: int = 200) -> Path:
    directory = tmp_path / "judge"
    stage_writer.write_stage(directory, _calls(n))
    return directory


def _whole(directory: Path, items: set[str], monkeypatch: pytest.MonkeyPatch) -> Found:
    """The items' calls as every shard read whole reads them (the read before the tables)."""
    with monkeypatch.context() as patch:
        patch.setattr(item_reader, "_placed_items", lambda directory, wanted: None)
        return [(c.path, c.line, c.call) for c in read_items(directory, items)]


def _tabled(directory: Path, items: set[str]) -> Found | None:
    found = item_table.tabled_items(directory, items)
    return None if found is None else [(c.path, c.line, c.call) for c in found]


def _entries(directory: Path) -> list[tuple[str, str]]:
    manifest = directory / stage_folders.CALLS_FILE
    return shards.manifest_entries(manifest, manifest.read_text(encoding="utf-8"))


def _rename_in_manifest(directory: Path, old: str, data: bytes) -> str:
    """`old` replaced by a file of `data` under its own content's name, the manifest naming it (as a
    writer would: a forged table or shard that the manifest vouches for)."""
    kind, prefix = shards.prefix_of(old)
    sha = hashlib.sha256(data).hexdigest()
    new = f"{kind}-{prefix}-{sha[:16]}.jsonl"
    (directory / old).unlink()
    (directory / new).write_bytes(data)
    entries = [(new, sha) if name == old else (name, s) for name, s in _entries(directory)]
    (directory / stage_folders.CALLS_FILE).write_text(shards.manifest_text(entries), encoding="utf-8")
    return new


def _forge_table(directory: Path, change: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> None:
    """Every table's runs changed by `change` (its opening kept), the manifest naming the new tables."""
    for name, _ in _entries(directory):
        if shards.prefix_of(name)[0] == shards.TABLE_KIND:
            head, items, sizes, lines, digests = [
                json.loads(x) for x in (directory / name).read_text().splitlines()
            ]
            runs = [
                {"bytes": b, "item": i, "lines": n, "sha256": digests[64 * k : 64 * k + 64]}
                for k, (i, b, n) in enumerate(zip(items, sizes, lines, strict=True))
            ]
            runs = change(runs)
            head["runs"] = len(runs)
            columns = [
                head,
                [run.get("item") for run in runs],
                [run.get("bytes") for run in runs],
                [run.get("lines") for run in runs],
                "".join(run["sha256"] for run in runs),
            ]
            text = "".join(json.dumps(c, sort_keys=True, separators=(",", ":")) + "\n" for c in columns)
            _rename_in_manifest(directory, name, text.encode())


def test_the_writer_names_a_table_of_items_for_each_shard_of_calls(
    tmp_path: Path, small_threshold: None
) -> None:
    directory = _recorded(tmp_path)
    entries = _entries(directory)
    calls = sorted(shards.prefix_of(n)[1] for n, _ in entries if n.startswith("calls-"))
    tables = sorted(shards.prefix_of(n)[1] for n, _ in entries if n.startswith("items-"))
    assert calls == tables and len(calls) > 1
    assert [shards.prefix_of(n)[0] for n, _ in entries][-len(tables) :] == ["items"] * len(tables)  # last
    # whole readers leave them out: parse_manifest names the shards it always named
    manifest = directory / stage_folders.CALLS_FILE
    assert not [n for n, _ in shards.parse_manifest(manifest, manifest.read_text()) if n.startswith("items-")]
    assert len(list(stage_reader.read_stage(directory))) == 200
    for name, _ in entries:
        if name.startswith("items-"):
            head = json.loads((directory / name).read_text().splitlines()[0])
            shard = directory / head["shard"]
            assert head["bytes"] == shard.stat().st_size and (head["shard"], head["sha256"]) in entries


def test_an_item_is_read_through_the_tables_not_its_shards_whole(
    tmp_path: Path, small_threshold: None, whole_reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = _recorded(tmp_path)
    for items in ({"901"}, {"900", "904"}):
        whole_reads.clear()
        found = _tabled(directory, items)
        assert found is not None and not [n for n in whole_reads if not n.startswith("items-")]
        assert found == _whole(directory, items, monkeypatch) and len(found) == 40 * len(items)
    assert _tabled(directory, {"no such item"}) == []


def test_audit_by_item_iteration_and_metric_reads_no_shard_of_calls_whole(
    tmp_path: Path, small_threshold: None, whole_reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = _recorded(tmp_path)
    monkeypatch.chdir(tmp_path)  # no dvc.yaml here: the folder is not marked as owned by no stage
    args = ["audit", "--recordings", str(tmp_path), "--item", "902", "--iteration", "3", "--format", "jsonl"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert not [n for n in whole_reads if n.startswith("calls-")]
    [shown] = [json.loads(line) for line in result.output.splitlines()]
    assert shown["context"]["item"] == "902" and shown["context"]["step"] == 3 and shown["problem"] is None
    for name, _ in _entries(directory):  # the tables gone: the same call, every shard read whole
        if name.startswith("items-"):
            (directory / name).unlink()
    whole_reads.clear()
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 0 and again.output == result.output
    assert [n for n in whole_reads if n.startswith("calls-")]


def _calls_read_whole(directory: Path, whole_reads: list[str], items: set[str]) -> Found | None:
    whole_reads.clear()
    found = _tabled(directory, items)
    assert found is None or not [n for n in whole_reads if n.startswith("calls-")]
    return found


def test_a_table_that_lists_fewer_lines_than_its_shard_holds_is_not_used(
    tmp_path: Path, small_threshold: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = _recorded(tmp_path)
    before = _whole(directory, {"901"}, monkeypatch)
    _forge_table(directory, lambda runs: [run for run in runs if run["item"] != "901"])  # its lines unlisted
    assert _tabled(directory, {"901"}) is None  # the runs do not tile the shard
    assert [(p, n, c) for p, n, c in _whole(directory, {"901"}, monkeypatch)] == before


def test_a_line_added_to_a_shard_past_its_table_is_not_hidden(
    tmp_path: Path, small_threshold: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = _recorded(tmp_path)
    [name, *_] = [n for n, _ in _entries(directory) if n.startswith("calls-")]
    data = (directory / name).read_bytes()
    first = data.split(b"\n")[0]
    added = first.replace(b'"item":"9', b'"item":"7', 1)  # a line of item 7xx, same key: same shard
    item = json.loads(added)["context"]["item"]
    new = _rename_in_manifest(directory, name, data + added + b"\n")  # the manifest vouching for it
    assert _tabled(directory, {item}) is None  # the shard is no longer the size its table gives
    [(path, _, call)] = _whole(directory, {item}, monkeypatch)  # the whole read shows it
    assert path.name == new and call.context.item == item


@pytest.mark.parametrize(
    "change",
    [
        lambda runs: [{**runs[0], "bytes": runs[0]["bytes"] + 10**9}, *runs[1:]],  # past the file's end
        lambda runs: [{**run, "bytes": 0} if i == 0 else run for i, run in enumerate(runs)],  # empty run
        lambda runs: [{**run, "item": "901"} for run in runs],  # every run claims item 901
        lambda runs: [{**run, "lines": run["lines"] + 1} for run in runs],  # a line count off (and its sum)
        lambda runs: [{**run, "sha256": "0" * 64} for run in runs],  # a run's digest off
        lambda runs: [{**run, "bytes": str(run["bytes"])} for run in runs],  # another form
        lambda runs: [{**run, "sha256": run["sha256"][:63]} for run in runs],  # a digest short
        lambda runs: [*runs[1:], runs[0]],  # runs out of order: each at the wrong place
    ],
)
def test_a_forged_table_the_manifest_vouches_for_is_not_trusted(
    tmp_path: Path,
    small_threshold: None,
    whole_reads: list[str],
    monkeypatch: pytest.MonkeyPatch,
    change: Callable[[list[dict[str, Any]]], list[dict[str, Any]]],
) -> None:
    directory = _recorded(tmp_path)
    before = _whole(directory, {"901"}, monkeypatch)
    _forge_table(directory, change)
    assert _calls_read_whole(directory, whole_reads, {"901"}) is None
    assert _whole(directory, {"901"}, monkeypatch) == before


def test_an_item_in_two_runs_has_both_read(
    tmp_path: Path, small_threshold: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = _recorded(tmp_path)

    def split(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for run in runs:
            if run["item"] != "901" or run["lines"] < 2:
                out.append(run)
                continue
            shard_lines: list[bytes] = split.lines.pop(0)  # type: ignore[attr-defined]
            one, two = shard_lines[:1], shard_lines[1:]
            for part in (one, two):
                data = b"".join(part)
                out.append(
                    {
                        "bytes": len(data),
                        "item": "901",
                        "lines": len(part),
                        "sha256": hashlib.sha256(data).hexdigest(),
                    }
                )
        return out

    before = _tabled(directory, {"901"})
    assert before is not None
    by_shard: dict[Path, list[bytes]] = {}
    for path, number, _ in before:
        line = path.read_bytes().split(b"\n")[number - 1] + b"\n"
        by_shard.setdefault(path, []).append(line)
    split.lines = [by_shard[p] for p in sorted(by_shard) if len(by_shard[p]) >= 2]  # type: ignore[attr-defined]
    _forge_table(directory, split)
    assert _tabled(directory, {"901"}) == before


@pytest.mark.parametrize("how", ["missing", "edited", "older"])
def test_without_a_usable_table_the_item_is_read_as_before_without_error(
    tmp_path: Path, small_threshold: None, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    directory = _recorded(tmp_path)
    before = _whole(directory, {"903"}, monkeypatch)
    tables = [n for n, _ in _entries(directory) if n.startswith("items-")]
    if how == "missing":
        (directory / tables[0]).unlink()
    elif how == "edited":
        table = directory / tables[0]
        table.write_bytes(table.read_bytes().replace(b'"items_table":1', b'"items_table":2'))
    else:  # written before the tables: the manifest names none
        entries = [(n, s) for n, s in _entries(directory) if not n.startswith("items-")]
        for name in tables:
            (directory / name).unlink()
        (directory / stage_folders.CALLS_FILE).write_text(shards.manifest_text(entries), encoding="utf-8")
    assert _tabled(directory, {"903"}) is None
    result = CliRunner().invoke(
        main, ["audit", "--recordings", str(tmp_path), "--item", "903", "--format", "jsonl"]
    )
    assert result.exit_code == 0, result.output
    assert len(result.output.splitlines()) == len(before) == 40
    if how == "older":  # and it replays as it did
        assert len(list(stage_reader.read_stage(directory))) == 200


def test_a_rerun_keeps_unchanged_tables_and_drops_the_old_ones(tmp_path: Path, small_threshold: None) -> None:
    calls = _calls(200)
    directory = tmp_path / "judge"
    stage_writer.write_stage(directory, calls)
    first = _shard_files(directory)
    calls[0] = _calls(1, salt="changed")[0]
    stage_writer.write_stage(directory, calls)
    second = _shard_files(directory)
    named = {n for n, _ in _entries(directory)}
    assert set(second) == named  # no table the manifest does not name is left
    kept = {n for n in first if n in second and n.startswith("items-")}
    assert kept and len(kept) < len([n for n in first if n.startswith("items-")])
    assert all(second[n] == first[n] for n in kept)  # the same file (inode): not rewritten


def test_a_recording_rewritten_in_one_file_leaves_no_table(tmp_path: Path, small_threshold: None) -> None:
    directory = _recorded(tmp_path)
    assert [n for n in _shard_files(directory) if n.startswith("items-")]
    stage_writer.write_stage(directory, _calls(8))  # at the threshold: one file again
    assert [p.name for p in directory.iterdir()] == [stage_folders.CALLS_FILE]
    assert _tabled(directory, {"901"}) is None
