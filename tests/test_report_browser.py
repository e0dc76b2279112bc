"""The HTML report in a real headless Chromium: the index links to each item's page and back, an
item's iterations start collapsed, open on click to the exact prompt (its shared texts filled in from
where the page stores them), the report's own script runs, markup in any field stays text on the index
and on the item pages, and the chart's labels stay inside the drawing.

Needs the Debian packages chromium and chromium-driver (/usr/bin/chromium, /usr/bin/chromedriver);
skipped without them. Set JUDGELOOP_SCREENSHOT_DIR to keep a screenshot of the opened report.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.experiments.paper.aggregation import PAPER_FIGURE2
from pipeline.experiments.paper.report.html import write_report
from pipeline.reports.svg import figure2_svg
from tests.test_report_html import HOSTILE, build_hostile, build_sample
from tests.webdriver import CHROMEDRIVER, CHROMIUM, Chrome

# Read at import: the autouse fixture in conftest.py removes every JUDGELOOP_* variable from the
# environment before each test runs.
SCREENSHOT_DIR = os.environ.get("JUDGELOOP_SCREENSHOT_DIR")

# A prompt as the page stores it: its own words, and links standing for texts shown elsewhere.
RESOLVE = """
function resolved(el) {
  let text = "";
  for (const node of el.childNodes) {
    if (node.nodeType === Node.TEXT_NODE) text += node.data;
    else if (node.tagName === "A" && (node.getAttribute("href") || "").startsWith("#"))
      text += resolved(document.getElementById(node.getAttribute("href").slice(1)));
    else if (node.nodeType === Node.ELEMENT_NODE) text += resolved(node);
  }
  return text;
}
function call(id) {
  const pres = [];
  for (const child of document.getElementById(id).children) {
    if (child.tagName === "PRE") pres.push(child);
    else for (const inner of child.children) if (inner.tagName === "PRE") pres.push(inner);
  }
  return pres.map(resolved);
}
"""

pytestmark = pytest.mark.skipif(
    not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
    reason=f"needs {CHROMIUM} and {CHROMEDRIVER}: apt-get install -y chromium chromium-driver",
)


@pytest.fixture(scope="module")
def report() -> Iterator[tuple[Path, str]]:
    """Item 901's page, and the regeneration prompt of its iteration 1."""
    refinements, summary, records = build_sample()
    regeneration = refinements[0].iterations[1].regeneration_prompt
    assert regeneration is not None
    with tempfile.TemporaryDirectory(prefix="judgeloop-report-") as tmp:
        write_report(Path(tmp) / "report.html", refinements, summary, records, "browser test")
        yield Path(tmp) / "report" / "item-901.html", regeneration


@pytest.fixture(scope="module")
def chrome() -> Iterator[Chrome]:
    with (
        tempfile.TemporaryDirectory(prefix="judgeloop-chrome-") as tmp,
        Chrome(Path(tmp) / "profile", Path(tmp) / "chromedriver.log") as browser,
    ):
        yield browser


def test_the_index_links_to_each_item_page_and_back(report: tuple[Path, str], chrome: Chrome) -> None:
    path, _ = report
    index = path.parent.parent / "report.html"
    chrome.get(index.as_uri())
    chrome.wait_until("return document.readyState === 'complete';")
    assert chrome.execute("return document.querySelectorAll('section.item, div.call').length;") == 0
    chrome.click(chrome.find("tr#item-901 a"))
    chrome.wait_until("return document.querySelector('section.item h1') !== null;")
    assert chrome.execute("return location.href;") == path.as_uri()
    assert chrome.execute("return document.querySelector('section.item h1').textContent;") == "Item 901"
    chrome.click(chrome.find("p.back a"))
    chrome.wait_until("return document.getElementById('figure2') !== null;")
    assert chrome.execute("return location.href;") == index.as_uri() + "#item-901"


def test_iteration_opens_to_the_exact_prompt(report: tuple[Path, str], chrome: Chrome) -> None:
    path, regeneration = report
    chrome.get(path.as_uri())
    chrome.wait_until("return document.readyState === 'complete';")

    iteration = chrome.find("details#item-901-iter-1")
    prompt = chrome.find("#item-901-iter-1-assess-0 > pre[data-role=user]")
    reply = chrome.find("#item-901-iter-1-assess-0 > pre.reply")
    assert chrome.attribute(iteration, "open") is None
    assert not chrome.displayed(prompt) and not chrome.displayed(reply)

    chrome.click(chrome.find("details#item-901-iter-1 > summary"))
    chrome.wait_until("return document.getElementById('item-901-iter-1').open;")
    assert chrome.attribute(iteration, "open") is not None
    # The prompt is short on the page, its long texts being links: it shows with the iteration.
    assert chrome.displayed(reply) and chrome.displayed(prompt)
    # Its shared texts are links; filled in from where they are stored, it is the prompt as sent.
    assert chrome.execute(RESOLVE + "return call('item-901-iter-1-assess-0')[1];") == regeneration
    assert "feedback, iteration 1" in chrome.text(prompt)

    if SCREENSHOT_DIR:
        directory = Path(SCREENSHOT_DIR)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "report-viewport.png").write_bytes(chrome.screenshot())
        (directory / "report-full.png").write_bytes(chrome.screenshot(full_page=True))
    else:
        assert chrome.screenshot().startswith(b"\x89PNG")


def test_a_link_in_a_prompt_opens_the_text_it_stands_for(report: tuple[Path, str], chrome: Chrome) -> None:
    path, _ = report
    chrome.get(path.as_uri() + "#item-901-iter-1")
    chrome.wait_until("return document.getElementById('item-901-iter-1').open;")
    chrome.click(chrome.find("#item-901-iter-1-completeness-0 > pre > a[href='#item-901-transcript']"))
    chrome.wait_until("return document.querySelector('#item-901 details.transcript').open;")
    assert chrome.displayed(chrome.find("#item-901-transcript"))


def test_injected_markup_stays_text_and_the_reports_script_runs(
    report: tuple[Path, str], chrome: Chrome
) -> None:
    path, _ = report
    chrome.get(path.as_uri())
    chrome.wait_until("return document.readyState === 'complete';")
    # The transcript's <script> and <img onerror> would set window.__pwned if they were markup.
    assert chrome.execute("return window.__pwned === undefined && document.scripts.length === 1;")
    assert chrome.execute("return document.querySelectorAll('img').length;") == 0
    transcript = chrome.execute("return document.getElementById('item-901-transcript').textContent;")
    assert "<script>window.__pwned = 1</script>" in transcript
    # The report's own script is allowed by the CSP hash: it marks the page and adds the buttons.
    assert chrome.execute("return document.documentElement.classList.contains('js');")
    chrome.click(chrome.find("#item-901 .tools button"))
    assert chrome.execute(
        "return [...document.querySelectorAll('#item-901 details.iteration')].every(d => d.open);"
    )


def test_a_link_to_a_collapsed_metric_opens_it(report: tuple[Path, str], chrome: Chrome) -> None:
    path, _ = report
    chrome.get(path.as_uri() + "#item-901-iter-2-completeness")
    chrome.wait_until("return document.getElementById('item-901-iter-2').open;")
    assert chrome.displayed(chrome.find("#item-901-iter-2-completeness"))


def _nothing_ran_or_loaded(chrome: Chrome) -> None:
    assert chrome.execute("return window.__pwned === undefined && document.scripts.length === 1;")
    assert chrome.execute("return document.querySelectorAll('img, textarea, iframe, object').length;") == 0


def test_markup_in_every_field_and_a_1_mb_reply_stay_text(chrome: Chrome, tmp_path: Path) -> None:
    refinements, summary, records = build_hostile()
    index = tmp_path / "hostile.html"
    report = write_report(index, refinements, summary, records, HOSTILE)
    chrome.get(index.as_uri())
    chrome.wait_until("return document.readyState === 'complete';", timeout=30)
    _nothing_ran_or_loaded(chrome)
    assert chrome.execute("return document.title;") == HOSTILE
    assert HOSTILE in chrome.execute("return document.querySelector('dl.facts').textContent;")
    assert HOSTILE in chrome.execute(
        "return [...document.querySelectorAll('svg text.metric')].map(t => t.textContent);"
    )
    assert chrome.execute("return document.querySelector('nav tr[id] a').textContent;") == HOSTILE

    # The item's page, where the transcript, the prompts and the replies land.
    [name] = report.pages
    chrome.get((tmp_path / report.folder / name).as_uri())
    chrome.wait_until("return document.readyState === 'complete';", timeout=30)
    _nothing_ran_or_loaded(chrome)
    assert chrome.execute("return document.title;") == f"Item {HOSTILE} · {HOSTILE}"
    heading = chrome.execute("return document.querySelector('section.item h1').textContent;")
    assert heading == f"Item {HOSTILE}"
    assert HOSTILE in chrome.execute("return document.querySelector('p.back a').textContent;")
    # The options (a stop string) are shown as Python writes them: the quote escaped, the markup as is.
    markup = HOSTILE.split("'")[0]
    assert markup in chrome.execute("return document.querySelector('dl.facts').textContent;")
    # Every prompt and reply, read back from the DOM with its shared texts filled in, is the one sent.
    calls = chrome.execute(
        "return [...document.querySelectorAll('div.call')]"
        ".map(d => [d.id, d.querySelector('code').textContent]);"
    )
    assert len(calls) == len(records)
    for ident, key in calls:
        record = records[key]
        texts = chrome.execute(RESOLVE + "return call(arguments[0]);", ident)
        assert texts == [m.content for m in record.request.messages] + [record.reply.text]


def _labels_outside_the_chart(chrome: Chrome) -> list[str]:
    return list(
        chrome.execute(
            "const svg = document.querySelector('svg.chart'); const box = svg.viewBox.baseVal;"
            "return [...svg.querySelectorAll('text')].filter(t => { const b = t.getBBox();"
            "  return b.x < box.x || b.y < box.y || b.x + b.width > box.x + box.width"
            "    || b.y + b.height > box.y + box.height; }).map(t => t.textContent);"
        )
    )


def test_chart_labels_stay_inside_the_drawing(chrome: Chrome, tmp_path: Path) -> None:
    worst = {"mean": 1.0, "sd": 2.1234, "n": 123456789, "unscored": 987654321}
    none = {"mean": None, "sd": None, "n": 0, "unscored": 123456789012}
    figure2: dict[str, dict[str, dict[str, Any]]] = {
        "coherence": {"before": {"mean": 5.0, "sd": 0.0, "n": 142, "unscored": 0}, "after": worst},
        "Completeness, as the WWW judges MMMM it (a very long metric name indeed)": {
            "before": none,
            "after": worst,
        },
        "評価の一貫性": {"before": worst, "after": none},
    }
    page = tmp_path / "chart.html"
    page.write_text(f"<!DOCTYPE html><html><body>{figure2_svg(figure2, PAPER_FIGURE2)}</body></html>")
    chrome.get(page.as_uri())
    chrome.wait_until("return document.readyState === 'complete';")
    assert _labels_outside_the_chart(chrome) == []
