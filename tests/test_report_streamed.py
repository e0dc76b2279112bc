"""The paper's report reads refinement.jsonl an item at a time (issue 33): the metrics and the plots'
tables in one pass, the report in two (what the pages share, then the pages), each page written
before the next item is read, and the same bytes as when the results were held whole."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.data import jsonl
from pipeline.data.jsonl import write_jsonl
from pipeline.errors import ConfigError, InputError
from pipeline.experiments.paper.aggregation import compute_metrics, write_plots
from pipeline.experiments.paper.report.html import write_report
from pipeline.loops.results import Refinement, RefinementFile, iter_refinements, read_refinements
from tests.test_report_html import METRICS, build_sample


class Passes:
    """Refinements read again on each pass, logging every item handed out as ("read", pass, item)."""

    def __init__(self, refinements: list[Refinement], log: list[tuple[str, int, str]]) -> None:
        self.refinements, self.log, self.passes = refinements, log, 0

    def __iter__(self) -> Iterator[Refinement]:
        self.passes += 1
        number = self.passes
        for r in self.refinements:
            self.log.append(("read", number, r.item))
            yield r


def _results(tmp_path: Path) -> tuple[Path, list[Refinement]]:
    refinements, _, _ = build_sample()
    path = tmp_path / "refinement.jsonl"
    write_jsonl(path, refinements)
    return path, refinements


def test_refinements_are_read_an_item_at_a_time(tmp_path: Path) -> None:
    path, refinements = _results(tmp_path)
    with path.open("a", encoding="utf-8") as handle:
        handle.write("not a refinement\n")
    read = iter_refinements(path, METRICS)
    # The items before a broken line come out before it is reached: nothing is read ahead whole.
    assert [next(read).item for _ in refinements] == [r.item for r in refinements]
    with pytest.raises(InputError, match=":3"):
        next(read)


def test_a_refinement_file_reads_the_same_as_the_whole_read(tmp_path: Path) -> None:
    path, _ = _results(tmp_path)
    results = RefinementFile(path, METRICS)
    assert list(results) == list(results) == read_refinements(path, METRICS)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029é", max_size=40))
def test_lines_are_numbered_as_the_whole_text_splits_them_at_each_newline(text: str) -> None:
    # tmp_path is function-scoped: hypothesis reruns the body, so the file is made here.
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "lines.jsonl"
        path.write_bytes(text.encode("utf-8"))
        whole = text.removesuffix("\n").split("\n") if text else []
        assert list(jsonl._lines(path)) == list(
            enumerate((line.removesuffix("\r") for line in whole), start=1)
        )


def test_the_metrics_take_one_pass() -> None:
    refinements, summary, _ = build_sample()
    log: list[tuple[str, int, str]] = []
    passes = Passes(refinements, log)
    assert compute_metrics(passes, METRICS) == summary
    assert passes.passes == 1


def test_the_plots_take_one_pass(tmp_path: Path) -> None:
    refinements, summary, _ = build_sample()
    passes = Passes(refinements, [])
    write_plots(tmp_path / "held", refinements, summary)
    write_plots(tmp_path / "streamed", passes, summary)
    assert passes.passes == 1
    for name in ("figure2.csv", "scores_by_iteration.csv", "iterations_per_item.csv"):
        assert (tmp_path / "streamed" / name).read_bytes() == (tmp_path / "held" / name).read_bytes()


def test_the_report_reads_twice_and_writes_each_page_before_the_next_item(tmp_path: Path) -> None:
    refinements, summary, records = build_sample()
    (tmp_path / "held").mkdir()
    (tmp_path / "streamed").mkdir()
    held = write_report(tmp_path / "held" / "report.html", refinements, summary, records, "t")
    log: list[tuple[str, int, str]] = []
    index = tmp_path / "streamed" / "report.html"

    class Watched(Passes):
        def __iter__(self) -> Iterator[Refinement]:
            for r in super().__iter__():
                # The pages already written aside (pipeline.reports.pages.write_pages' staging folder).
                log.append(
                    (
                        "written",
                        self.passes,
                        ",".join(sorted(p.name for p in index.parent.glob(".report-*/*"))),
                    )
                )
                yield r

    passes = Watched(refinements, log)
    written = write_report(index, passes, summary, records, "t")
    assert passes.passes == 2
    second = [entry for entry in log if entry[0] == "written" and entry[1] == 2]
    # The second pass reads item k+1 only once item k's page is on disk.
    assert [entry[2] for entry in second] == ["", "item-901.html"]
    assert written == held
    for name in ("report.html", *(f"report/{page}" for page in held.pages)):
        assert (tmp_path / "streamed" / name).read_bytes() == (tmp_path / "held" / name).read_bytes()


def test_results_that_change_between_the_passes_are_refused(tmp_path: Path) -> None:
    refinements, summary, records = build_sample()

    class Shrinking:
        passes = 0

        def __iter__(self) -> Iterator[Refinement]:
            self.passes += 1
            return iter(refinements if self.passes == 1 else refinements[1:])

    with pytest.raises(ConfigError, match="changed while the report was written"):
        write_report(tmp_path / "report.html", Shrinking(), summary, records, "t")
    assert not (tmp_path / "report").exists()  # nothing half-written is left


def test_a_one_pass_iterator_is_refused(tmp_path: Path) -> None:
    refinements, summary, records = build_sample()
    with pytest.raises(TypeError, match="twice"):
        write_report(tmp_path / "report.html", iter(refinements), summary, records, "t")


def test_a_call_cited_by_several_items_is_counted_once(tmp_path: Path) -> None:
    refinements, _, records = build_sample()
    # A third item citing the first one's calls, and a call no recording has.
    copy = refinements[0].model_copy(update={"item": "903"})
    missing = "f" * 64
    first = copy.iterations[0]
    lost = first.model_copy(
        update={"assessment": first.assessment.model_copy(update={"call_keys": (missing, missing.upper())})}
    )
    copy = copy.model_copy(update={"iterations": (lost, *copy.iterations[1:])})
    cited = [*refinements, copy]
    keys = {
        key
        for r in cited
        for it in r.iterations
        for key in (*it.assessment.call_keys, *(k for m in it.metrics.values() for k in m.call_keys))
    }
    report = write_report(tmp_path / "report.html", cited, compute_metrics(cited, METRICS), records, "t")
    index = (tmp_path / "report.html").read_text(encoding="utf-8")
    # The upper-case spelling is another key (kept as text), not the lower-case one's bytes.
    assert f"<dt>Calls not recorded</dt><dd>2 of {len(keys)}</dd>" in index
    assert f"({len(keys) - 2:,} calls)" in index
    assert report.pages == ("item-901.html", "item-902.html", "item-903.html")


def test_the_recorded_calls_read_packed_give_the_same_index_and_pages(tmp_path: Path) -> None:
    """The scan marks a StageRecords call seen at its line's place, not by its key (a byte a call,
    bench/README.md "The report's memory"): with a call cited by two items, a call in two stages'
    recordings and calls no recording has, the report is byte for byte the one from a plain dict."""
    from pipeline.data.recorded_stages import StageRecords
    from pipeline.llm.recordings.stage_writer import write_stage
    from pipeline.llm.records import RecordedCall
    from pipeline.llm.types import CallContext

    refinements, _, records = build_sample()
    copy = refinements[0].model_copy(update={"item": "903"})
    first = copy.iterations[0]
    missing = ("f" * 64, "F" * 64, "e" * 64)
    lost = first.model_copy(
        update={"assessment": first.assessment.model_copy(update={"call_keys": (*missing, missing[0])})}
    )
    cited = [*refinements, copy.model_copy(update={"iterations": (lost, *copy.iterations[1:])})]
    summary = compute_metrics(cited, METRICS)
    keys = list(records)
    for n, stage in enumerate(("assess", "judge")):  # the first half in both stages, the rest in judge
        chosen = keys[: len(keys) // 2] if n == 0 else keys
        write_stage(
            tmp_path / "recordings" / stage,
            [RecordedCall(context=CallContext(stage=stage, item="901"), record=records[k]) for k in chosen],
        )
    packed = StageRecords.read(tmp_path / "recordings", ("assess", "judge"))
    held = write_report(tmp_path / "held" / "report.html", cited, summary, records, "t")
    read = write_report(tmp_path / "packed" / "report.html", cited, summary, packed, "t")
    assert read.pages == held.pages
    for name in ("report.html", *(f"report/{page}" for page in held.pages)):
        assert (tmp_path / "packed" / name).read_bytes() == (tmp_path / "held" / name).read_bytes()
    assert "<dt>Calls not recorded</dt><dd>3 of " in read.index
