"""A run's summary written as it is encoded (pipeline.llm.run_summary, issue 33): the same bytes as
the summary dumped whole, its keys sorted."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.llm import run_summary

counts = st.integers(0, 10**9)
keys = st.dictionaries(st.text(max_size=40), st.sampled_from(["hit", "miss"]), max_size=50)


def whole(summary: dict[str, object], served: dict[str, str]) -> str:
    return json.dumps({**summary, "keys": dict(sorted(served.items()))}, indent=1) + "\n"


@settings(deadline=None)  # a loaded machine makes an example slow, not wrong
@given(counts, counts, keys, st.booleans())
def test_same_bytes_as_dumped_whole(hits: int, calls: int, served: dict[str, str], more: bool) -> None:
    summary: dict[str, object] = {"stage": "judge", "mode": "replay", "hits": hits, "keys": None}
    if more:
        summary["empty_replies"] = calls  # after "keys", as a session adds it
    assert "".join(run_summary.summary_chunks(summary, served)) == whole(summary, served)


def test_many_keys_in_pieces(tmp_path: Path) -> None:
    served = {f"jl2:{n:032x}": "hit" if n % 3 else "miss" for n in range(20_000, 0, -1)}
    summary = {"stage": "refine", "mode": "auto", "hits": 1, "model_calls": 2, "keys": None}
    chunks = list(run_summary.summary_chunks(summary, served))
    assert len(chunks) > 2  # written as it is encoded, not whole
    run_summary.write_summary(tmp_path / "refine.json", summary, served)
    assert (tmp_path / "refine.json").read_text() == whole(summary, served)
    assert list(json.loads((tmp_path / "refine.json").read_text())["keys"]) == sorted(served)
