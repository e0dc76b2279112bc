"""A data file a person gave us (labels, catalogs, ratings; SummEval's annotations) is read through the
descriptor whose size was checked (pipeline.data.input_files.read_text, pipeline.data.summeval): a
file replaced by a larger one after a look at its path is never read whole past the limit."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from pipeline.data import input_files, summeval
from pipeline.errors import InputError


@pytest.mark.parametrize("reader", ["read_text", "summeval"])
def test_the_size_checked_is_that_of_the_bytes_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader: str
) -> None:
    monkeypatch.setattr(input_files, "MAX_INPUT_BYTES", 64)
    path = tmp_path / "labels.csv"
    path.write_text("id,score\n1,2\n", encoding="utf-8")
    looked = Path.stat

    def looked_then_replaced(self: Path, *args: Any, **kwargs: Any) -> Any:
        status = looked(self, *args, **kwargs)
        if self == path:  # another file, past the limit, put in its place after the look
            path.write_text("id,score\n" + "1,2\n" * 100, encoding="utf-8")
        return status

    monkeypatch.setattr(Path, "stat", looked_then_replaced)
    try:
        if reader == "summeval":
            text = "\n".join(summeval._lines(path))
        else:
            text = input_files.read_text(path, "labels.csv")
    except InputError as refused:
        assert "more than the 64 judgeloop reads" in str(refused)
    else:
        assert len(text.encode("utf-8")) <= 64, "bytes read past the size checked"


def test_a_file_past_the_limit_is_refused_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(input_files, "MAX_INPUT_BYTES", 64)
    path = tmp_path / "labels.csv"
    path.write_text("id,score\n" + "1,2\n" * 100, encoding="utf-8")
    with pytest.raises(InputError, match=r"labels\.csv.*409 bytes, more than the 64"):
        input_files.read_text(path, "labels.csv")


def test_bytes_past_the_limit_are_refused_on_what_was_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """A file that grows between the look at its descriptor and the read (or a gzip file that
    unpacks past the limit) is refused on what was read: no more than the limit and one byte read."""
    monkeypatch.setattr(input_files, "MAX_INPUT_BYTES", 64)
    stream = io.BytesIO(b"1,2\n" * 100)
    with pytest.raises(InputError, match="more than the 64"):
        input_files.read_limited(stream, "labels.csv")
    assert stream.tell() == 65
