"""A dry-run stage's results on disk (pipeline.tools.status.dry_results): the file holds the bytes
the stage's own write gives, the compare with the stage's output finds any difference, and the next
stage is fed exactly the results holding no placeholder."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.data.jsonl import Result
from pipeline.experiments.steps import jsonl_output
from pipeline.tools.status.dry_results import KEPT, DryResults, Kept, staged_work
from pipeline.tools.status.probe import MARK, placeholder


class Row(Result):
    item: str
    text: str


OUTPUT = jsonl_output(Row)
ROWS = [Row(item=f"{n:03d}", text=f"reply {n}") for n in range(5)]


def test_the_file_holds_the_stages_own_bytes_and_what_is_kept(tmp_path: Path) -> None:
    rows = [*ROWS[:2], Row(item="002", text=placeholder("k")), *ROWS[3:]]
    results = DryResults(OUTPUT, tmp_path / "dry.jsonl")
    kept = staged_work(lambda _: iter(rows), results)(None)
    OUTPUT.write(tmp_path / "stage.jsonl", rows)
    assert results.path.read_bytes() == (tmp_path / "stage.jsonl").read_bytes()
    assert kept == [Kept(r.item, MARK in r.text) for r in rows]
    assert not results.differs_from(tmp_path / "stage.jsonl")
    known = results.known()
    assert known is not None
    assert known.whole() == [r for r in rows if r.item != "002"]
    assert list(known.file()) == [r for r in rows if r.item != "002"]


def test_no_placeholder_feeds_the_file_itself(tmp_path: Path) -> None:
    results = DryResults(OUTPUT, tmp_path / "dry.jsonl")
    results.write(ROWS)
    known = results.known()
    assert known is not None and known.path == results.path
    assert list(known.file()) == ROWS


@settings(max_examples=50, deadline=None)
@given(at=st.integers(min_value=0), by=st.integers(min_value=1, max_value=255), cut=st.booleans())
def test_any_difference_is_found(
    tmp_path_factory: pytest.TempPathFactory, at: int, by: int, cut: bool
) -> None:
    folder = tmp_path_factory.mktemp("d")
    results = DryResults(OUTPUT, folder / "dry.jsonl")
    results.write(ROWS)
    ours = results.path.read_bytes()
    at %= len(ours)
    theirs = ours[:at] if cut else ours[:at] + bytes([(ours[at] + by) % 256]) + ours[at + 1 :]
    (folder / "stage.jsonl").write_bytes(theirs)
    assert results.differs_from(folder / "stage.jsonl")
    assert results.differs_from(folder / "absent.jsonl")


def test_a_long_file_is_compared_past_its_first_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("pipeline.tools.status.dry_results.BLOCK", 16)
    results = DryResults(OUTPUT, tmp_path / "dry.jsonl")
    results.write(ROWS)
    ours = results.path.read_bytes()
    (tmp_path / "stage.jsonl").write_bytes(ours)
    assert not results.differs_from(tmp_path / "stage.jsonl")
    (tmp_path / "stage.jsonl").write_bytes(ours[:-3] + b"x" + ours[-2:])
    assert results.differs_from(tmp_path / "stage.jsonl")


def test_kept_results_are_never_written(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        KEPT.write(tmp_path / "x", [])


def test_an_output_not_read_back_feeds_nothing(tmp_path: Path) -> None:
    unread = type(OUTPUT)(OUTPUT.item_of, OUTPUT.text_of, OUTPUT.write)
    results = DryResults(unread, tmp_path / "dry.jsonl")
    results.write(ROWS)
    assert results.known() is None
