"""The HTML report in a real headless Chromium: iterations start collapsed, open on click to the
exact prompt, the report's own script runs, and the transcript's injected markup never does.

Needs the Debian packages chromium and chromium-driver (/usr/bin/chromium, /usr/bin/chromedriver);
skipped without them. Set JUDGELOOP_SCREENSHOT_DIR to keep a screenshot of the opened report.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.reports.html import render_html
from tests.test_report_html import build_sample
from tests.webdriver import CHROMEDRIVER, CHROMIUM, ELEMENT, Chrome

# Read at import: the autouse fixture in conftest.py removes every JUDGELOOP_* variable from the
# environment before each test runs.
SCREENSHOT_DIR = os.environ.get("JUDGELOOP_SCREENSHOT_DIR")

pytestmark = pytest.mark.skipif(
    not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
    reason=f"needs {CHROMIUM} and {CHROMEDRIVER}: apt-get install -y chromium chromium-driver",
)


@pytest.fixture(scope="module")
def report() -> Iterator[tuple[Path, str]]:
    refinements, summary, records = build_sample()
    regeneration = refinements[0].iterations[1].regeneration_prompt
    assert regeneration is not None
    with tempfile.TemporaryDirectory(prefix="judgeloop-report-") as tmp:
        path = Path(tmp) / "report.html"
        path.write_text(render_html(refinements, summary, records, "browser test"), encoding="utf-8")
        yield path, regeneration


@pytest.fixture(scope="module")
def chrome() -> Iterator[Chrome]:
    with (
        tempfile.TemporaryDirectory(prefix="judgeloop-chrome-") as tmp,
        Chrome(Path(tmp) / "profile", Path(tmp) / "chromedriver.log") as browser,
    ):
        yield browser


def test_iteration_opens_to_the_exact_prompt(report: tuple[Path, str], chrome: Chrome) -> None:
    path, regeneration = report
    chrome.get(path.as_uri())
    chrome.wait_until("return document.readyState === 'complete';")

    iteration = chrome.find("details#item-901-iter-1")
    prompt = chrome.find("#item-901-iter-1-assess-0-msg-1")
    reply = chrome.find("#item-901-iter-1-assess-0-reply")
    assert chrome.attribute(iteration, "open") is None
    assert not chrome.displayed(prompt) and not chrome.displayed(reply)

    chrome.click(chrome.find("details#item-901-iter-1 > summary"))
    chrome.wait_until("return document.getElementById('item-901-iter-1').open;")
    assert chrome.attribute(iteration, "open") is not None
    assert chrome.displayed(reply)
    # A long prompt stays collapsed inside the open iteration, one more click away.
    assert not chrome.displayed(prompt)
    chrome.click(chrome.find("details.msg:has(> #item-901-iter-1-assess-0-msg-1) > summary"))
    chrome.wait_until("return document.getElementById('item-901-iter-1-assess-0-msg-1').offsetHeight > 0;")
    assert chrome.displayed(prompt)
    assert chrome.execute("return arguments[0].textContent;", {ELEMENT: prompt}) == (regeneration)
    assert "EVALUATION FEEDBACK:" in chrome.text(prompt)

    if SCREENSHOT_DIR:
        directory = Path(SCREENSHOT_DIR)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "report-viewport.png").write_bytes(chrome.screenshot())
        (directory / "report-full.png").write_bytes(chrome.screenshot(full_page=True))
    else:
        assert chrome.screenshot().startswith(b"\x89PNG")


def test_injected_markup_stays_text_and_the_reports_script_runs(
    report: tuple[Path, str], chrome: Chrome
) -> None:
    path, _ = report
    chrome.get(path.as_uri())
    chrome.wait_until("return document.readyState === 'complete';")
    # The transcript's <script> and <img onerror> would set window.__pwned if they were markup.
    assert chrome.execute("return window.__pwned === undefined && document.scripts.length === 1;")
    assert chrome.execute("return document.querySelectorAll('img').length;") == 0
    transcript = chrome.execute("return document.querySelector('#item-901-transcript pre').textContent;")
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
