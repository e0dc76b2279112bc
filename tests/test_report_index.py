"""The report index over every design (outputs/index.html) and the README's pictures (docs/): both
are the ones the committed outputs give; in a real headless Chromium with the network cut, the
index links every design's page, every page wears the same stylesheet and links back, and the
plots render."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.experiments.registry import designs
from pipeline.reports.frame import INDEX
from pipeline.reports.plots import plot_svg
from pipeline.tools.figures import figures
from pipeline.tools.report_index import render_index
from tests.conftest import ROOT
from tests.webdriver import CHROMEDRIVER, CHROMIUM, NO_NETWORK, Chrome

needs_chromium = pytest.mark.skipif(
    not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
    reason=f"needs {CHROMIUM} and {CHROMEDRIVER}: apt-get install -y chromium chromium-driver",
)


def test_the_committed_index_is_the_one_the_outputs_give(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    committed = (ROOT / INDEX).read_text(encoding="utf-8")
    assert render_index(INDEX) == committed, (
        "outputs/index.html is stale: `make replay` (its stage, report_index) or `./judgeloop report`"
    )


def test_the_readmes_pictures_are_the_ones_the_committed_results_give(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT)
    drawn = figures()
    assert "pipeline.svg" in drawn and any(name.endswith("figure2.svg") for name in drawn)
    for name, svg in drawn.items():
        path = ROOT / "docs" / name
        assert path.is_file() and path.read_text(encoding="utf-8") == svg, (
            f"docs/{name} is stale: `./judgeloop report --figures docs`"
        )
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docs/pipeline.svg" in readme and "figure2.svg" in readme


def test_a_plot_escapes_its_labels_and_draws_what_it_can() -> None:
    rows = [{"bar": "<b>x</b>", "mean": "2.5", "sd": "0.5"}, {"bar": "none", "mean": ""}]
    svg = plot_svg(rows, x="mean", y="bar", title="t & <t>", template="bar_horizontal")
    assert "<b>" not in svg and "&lt;b&gt;x&lt;/b&gt;" in svg and "t &amp; &lt;t&gt;" in svg
    assert svg.count("<rect") == 1 and "no value" in svg
    points = [
        {"x": "1", "y": "2", "series": "a"},
        {"x": "2", "y": "3", "series": "a"},
        {"x": "nan", "y": "1"},
    ]
    lines = plot_svg(points, x="x", y="y", title="t", template=None)
    assert lines.count("<circle") == 2 and lines.count("<polyline") == 1
    assert plot_svg(points, x="x", y="y", title="t", template=None) == lines  # same rows, same bytes


@pytest.fixture(scope="module")
def chrome() -> Iterator[Chrome]:
    with (
        tempfile.TemporaryDirectory(prefix="judgeloop-chrome-") as tmp,
        Chrome(Path(tmp) / "profile", Path(tmp) / "chromedriver.log", args=NO_NETWORK) as browser,
    ):
        yield browser


STYLE = "const s = getComputedStyle(document.body); return [s.fontFamily, s.backgroundColor, s.fontSize];"


@needs_chromium
def test_the_index_links_every_design_in_one_style_and_back(chrome: Chrome) -> None:
    index = ROOT / INDEX
    chrome.get(index.as_uri())
    chrome.wait_until("return document.readyState === 'complete';")
    style = chrome.execute(STYLE)
    links = chrome.execute(
        "return [...document.querySelectorAll('section.design')].map(s => "
        "[s.id, (s.querySelector('a[href$=\"report.html\"]') || {}).href]);"
    )
    assert [name for name, _ in links] == [d.name for d in designs()]
    for name, href in links:
        assert href, f"the index has no link to {name}'s report"
        chrome.get(href)
        chrome.wait_until("return document.readyState === 'complete';")
        assert chrome.execute(STYLE) == style, f"{name}'s page is not in the index's style"
        assert chrome.execute("return document.scripts.length;") == 1  # the frame's own script
        home = chrome.execute("return document.querySelector('p.home a').href;")
        assert home == index.as_uri(), f"{name}'s page does not link back to the index"


@needs_chromium
def test_the_plots_render_with_the_network_cut(chrome: Chrome, tmp_path: Path) -> None:
    # The control: with the same browser, what `dvc plots show` needs (Vega from a CDN) does not load.
    cdn = tmp_path / "cdn.html"
    cdn.write_text('<script src="https://cdn.jsdelivr.net/npm/vega@5"></script><p>x</p>', encoding="utf-8")
    chrome.get(cdn.as_uri())
    chrome.wait_until("return document.readyState === 'complete';", timeout=20)
    assert chrome.execute("return typeof vega;") == "undefined"

    chrome.get((ROOT / INDEX).as_uri())
    chrome.wait_until("return document.readyState === 'complete';")
    drawn = chrome.execute(
        "return [...document.querySelectorAll('svg.plot')].map(svg => {"
        " const box = svg.getBoundingClientRect();"
        " const marks = svg.querySelectorAll('rect, circle, polyline');"
        " const painted = [...marks].filter(m => { const b = m.getBoundingClientRect();"
        "   return b.width > 0 || b.height > 0; }).length;"
        " return [svg.querySelector('title').textContent, box.width, box.height, painted]; });"
    )
    declared = [p for d in designs() for s in d.stages for p in s.plots]
    assert len(drawn) == len(declared) >= 3
    for title, width, height, painted in drawn:
        assert width > 200 and height > 80, title
        assert painted > 0, f"{title}: nothing drawn"
