"""The report's files: an index and a folder of item pages beside it, every local link resolving
(the file exists and so does the #id on it), safe file names for any item id, and a folder written
anew, so the page of an item that is gone does not linger."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from pipeline.errors import ConfigError
from pipeline.experiments.paper.aggregation import compute_metrics
from pipeline.experiments.paper.report.html import write_report
from pipeline.loops.results import Refinement
from pipeline.reports.frame import INDEX
from pipeline.reports.pages import page_stems, pages_folder
from tests.report_dom import Page
from tests.test_report_html import METRICS, build_hostile, build_sample

# Item ids come from the names of the user's files: any of these must give a safe, distinct page.
HOSTILE_IDS = [
    "301",
    "../../etc/passwd",
    "..",
    "",
    "a b",
    "a-b",
    "a/b",
    "A",
    "a",
    "CON",
    "item-301",
    'x"><script>alert(1)</script>',
    "q?x=1#frag",
    "100%",
    "評価",
    "P" * 1000,
    "P" * 999 + "Q",
]
SAFE_NAME = re.compile(r"item-[A-Za-z0-9_-]{1,90}\.html")


def local_links(index: Path) -> int:
    """Check every link on the index and its item pages; returns how many point to another file."""
    index, folder = index.resolve(), index.parent.resolve() / pages_folder(index.name)
    pages = [index, *sorted(folder.iterdir())]
    parsed: dict[Path, Page] = {}

    def page(path: Path) -> Page:
        if path not in parsed:
            parsed[path] = Page(path.read_text(encoding="utf-8"))
        return parsed[path]

    across = 0
    for path in pages:
        for element in page(path).root.walk():
            href = element.attrs.get("href") if element.tag == "a" else None
            if href is None:
                continue
            link = urlsplit(href)
            assert not link.scheme and not link.netloc, f"{path.name}: {href} leaves the report"
            target = (path.parent / unquote(link.path)).resolve() if link.path else path
            if target == INDEX.resolve():
                continue  # the link up to the index over every design (pipeline.reports.frame)
            assert target.is_file(), f"{path.name}: {href} points to no file"
            assert target == index or target.parent == folder
            across += target != path
            if link.fragment:
                assert unquote(link.fragment) in page(target).ids, f"{path.name}: {href}: no such id"
    return across


def test_every_local_link_resolves(tmp_path: Path) -> None:
    refinements, summary, records = build_sample()
    index = tmp_path / "report.html"
    report = write_report(index, refinements, summary, records, "t")
    assert sorted(p.name for p in (tmp_path / "report").iterdir()) == ["item-901.html", "item-902.html"]
    assert report.folder == "report"
    # Each item page links back to its row on the index, and each row to its page.
    assert local_links(index) == 2 * len(refinements)


def test_the_page_of_a_hostile_item_id_is_written_and_linked(tmp_path: Path) -> None:
    refinements, summary, records = build_hostile()
    index = tmp_path / "a report with spaces.html"
    write_report(index, refinements, summary, records, "t")
    [written] = (tmp_path / "a report with spaces").iterdir()
    assert SAFE_NAME.fullmatch(written.name)
    assert local_links(index) == 2


def test_hostile_item_ids_give_safe_distinct_file_names() -> None:
    stems = page_stems(HOSTILE_IDS)
    assert stems[0] == "item-301"  # an id that is already safe keeps its name
    assert all(SAFE_NAME.fullmatch(f"{s}.html") for s in stems), stems
    assert len({s.casefold() for s in stems}) == len(HOSTILE_IDS)
    # A changed id's name does not depend on what else is in the run.
    assert page_stems(["a b"]) == page_stems(["a-b", "a b"])[1:]


def test_hostile_item_ids_are_written_inside_the_folder(tmp_path: Path) -> None:
    refinements, _, records = build_sample()
    template = refinements[1]
    hostile = [template.model_copy(update={"item": item}) for item in HOSTILE_IDS]
    index = tmp_path / "out" / "report.html"
    write_report(index, hostile, compute_metrics(hostile, METRICS), records, "t")
    written = sorted(p.name for p in (index.parent / "report").iterdir())
    assert len(written) == len(HOSTILE_IDS) and all(SAFE_NAME.fullmatch(n) for n in written)
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == sorted([*written, "report.html"])
    assert local_links(index) == 2 * len(HOSTILE_IDS)
    for item, stem in zip(HOSTILE_IDS, page_stems(HOSTILE_IDS), strict=True):
        page = Page((index.parent / "report" / f"{stem}.html").read_text(encoding="utf-8"))
        assert next(e for e in page.root.walk() if e.tag == "h1").text() == f"Item {item}"


def test_an_item_that_is_gone_leaves_no_page(tmp_path: Path) -> None:
    refinements, _, records = build_sample()
    index = tmp_path / "report.html"
    write_report(index, refinements, compute_metrics(refinements, METRICS), records, "t")
    assert (tmp_path / "report" / "item-902.html").exists()
    kept: list[Refinement] = refinements[:1]
    write_report(index, kept, compute_metrics(kept, METRICS), records, "t")
    assert sorted(p.name for p in (tmp_path / "report").iterdir()) == ["item-901.html"]
    assert "item-902" not in index.read_text(encoding="utf-8")
    assert local_links(index) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report", "report.html"]  # nothing left aside


def test_a_folder_that_is_not_the_reports_is_left_alone(tmp_path: Path) -> None:
    refinements, summary, records = build_sample()
    notes = tmp_path / "report" / "notes.txt"
    notes.parent.mkdir()
    notes.write_text("mine")
    with pytest.raises(ConfigError, match=r"report exists and holds more than the report's item pages"):
        write_report(tmp_path / "report.html", refinements, summary, records, "t")
    assert notes.read_text() == "mine"
    assert not (tmp_path / "report.html").exists()


@pytest.mark.parametrize("outside", ["empty", "item pages", "dangling"])
def test_a_link_at_the_pages_folder_s_name_is_left_alone_and_nothing_aside(
    tmp_path: Path, outside: str
) -> None:
    """A link where the item pages' folder goes (git keeps links) is not the report's folder: refused
    like any other, never removed through nor renamed over, and no pages left aside (writers-red;
    before: a raw OSError from rmtree or rename, the pages left in a hidden folder beside it)."""
    refinements, summary, records = build_sample()
    target = tmp_path / "elsewhere"
    if outside != "dangling":
        target.mkdir()
    if outside == "item pages":
        (target / "item-901.html").write_text("someone else's")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "report").symlink_to(target, target_is_directory=True)
    with pytest.raises(ConfigError, match=r"report exists and holds more than the report's item pages"):
        write_report(tmp_path / "out" / "report.html", refinements, summary, records, "t")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["report"]
    if outside == "item pages":
        assert (target / "item-901.html").read_text() == "someone else's"
