"""`judgeloop diff --html DIR`: the offline page. Parsed here (a table per metric, the flipped
judgements linked, each changed judgement's two calls side by side with the differing lines marked,
model text escaped), and opened in a real headless Chromium where it is installed (a changed
judgement starts closed and opens on click to both calls; markup in a reply stays text; nothing
loads from the network)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pipeline.llm.types import ChatRequest
from pipeline.tools.cli import main
from tests.report_dom import Element, Page
from tests.test_diff import SCORE, record, responder
from tests.webdriver import CHROMEDRIVER, CHROMIUM, Chrome

HOSTILE = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'


def hostile(model: str, said: str = HOSTILE) -> Callable[[ChatRequest], str]:
    """The judge-b responder, its judge replies carrying `said` (markup, unless told otherwise)."""
    plain = responder(model)

    def reply(request: ChatRequest) -> str:
        text = plain(request)
        return text.replace("Explanation:", f"Explanation: {said}", 1) if SCORE.search(text) else text

    return reply


@pytest.fixture(scope="module")
def page() -> Iterator[tuple[Path, dict[str, Any]]]:
    """The page of a run against one judged by another model, and the diff's JSON."""
    with tempfile.TemporaryDirectory(prefix="judgeloop-diff-page-") as tmp:
        root = Path(tmp)
        a = record(root / "a", "judge-a")
        b = record(root / "b", "judge-b", responder_of=hostile)
        found = CliRunner().invoke(main, ["diff", str(a), str(b), "--design", "paper", "--json"])
        assert found.exit_code == 0, found.output
        result = CliRunner().invoke(
            main, ["diff", str(a), str(b), "--design", "paper", "--html", str(root / "page")]
        )
        assert result.exit_code == 0, result.output
        yield root / "page" / "index.html", json.loads(found.stdout)


def _with_class(dom: Page, tag: str, name: str) -> list[Element]:
    return [e for e in dom.root.walk() if e.tag == tag and name in e.attrs.get("class", "").split()]


def _check_change(element: Element) -> None:
    """Both calls side by side, each naming its keys, the differing lines marked on either side."""
    sides = [e for e in element.walk() if e.tag == "div" and e.attrs.get("class") == "side"]
    assert len(sides) == 2
    # B's reply carries the markup as text, its changed lines marked as added; A's as removed.
    assert {"added", "removed"} <= {e.attrs.get("class") for e in element.walk() if e.tag == "span"}
    keys = [e.text() for e in element.walk() if e.tag == "p" and e.attrs.get("class") == "key"]
    assert len(keys) == 2 and all(k.startswith("jl") for k in keys), keys


def test_the_page_holds_a_table_per_metric_the_flips_and_both_calls_of_each_change(
    page: tuple[Path, dict[str, Any]],
) -> None:
    path, found = page
    html = path.read_text(encoding="utf-8")
    dom = Page(html)
    metrics, changes = found["metrics"], found["changes"]
    assert changes
    sections = _with_class(dom, "section", "metric-diff")
    assert [s.attrs["id"] for s in sections] == [f"paper-{m['metric']}" for m in metrics]
    details = _with_class(dom, "details", "change")
    expected = {f"paper-{c['metric']}-{c['item']}-{c['iteration']}" for c in changes}
    assert len(details) == len(changes) and {e.attrs["id"] for e in details} == expected
    for element in details:
        _check_change(element)
    links = {e.attrs.get("href") for e in dom.root.walk() if e.tag == "a"}
    assert {f"#paper-{c['metric']}-{c['item']}-{c['iteration']}" for c in changes if c["flip"]} <= links
    assert "<script>window.__pwned" not in html and "&lt;script&gt;window.__pwned" in html
    assert html.count("<script>") == 1  # the page's own script, nothing else
    assert "http://" not in html and "https://" not in html  # nothing to load


needs_chromium = pytest.mark.skipif(
    not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
    reason=f"needs {CHROMIUM} and {CHROMEDRIVER}: apt-get install -y chromium chromium-driver",
)


@needs_chromium
def test_in_chromium_a_change_opens_to_its_two_calls_and_markup_stays_text(
    page: tuple[Path, dict[str, Any]],
) -> None:
    path, found = page
    changes = found["changes"]
    first = changes[0]
    ident = f"paper-{first['metric']}-{first['item']}-{first['iteration']}"
    with (
        tempfile.TemporaryDirectory(prefix="judgeloop-chrome-") as tmp,
        Chrome(Path(tmp) / "profile", Path(tmp) / "chromedriver.log") as chrome,
    ):
        chrome.get(path.as_uri())
        chrome.wait_until("return document.readyState === 'complete';")
        assert chrome.execute("return window.__pwned === undefined && document.scripts.length === 1;")
        assert chrome.execute("return document.querySelectorAll('img').length;") == 0
        details = chrome.find(f"details#{ident}")
        side = chrome.find(f"details#{ident} div.side pre")
        assert chrome.attribute(details, "open") is None and not chrome.displayed(side)
        chrome.click(chrome.find(f"details#{ident} > summary"))
        chrome.wait_until(f"return document.getElementById('{ident}').open;")
        assert chrome.displayed(side)
        assert chrome.execute(f"return document.querySelectorAll('#{ident} div.side').length;") == 2
        added = chrome.execute(f"return document.querySelectorAll('#{ident} span.added').length;")
        assert added > 0
        # The two sides stand next to each other, not one under the other.
        lefts = chrome.execute(
            f"return [...document.querySelectorAll('#{ident} div.side')]"
            ".map(e => e.getBoundingClientRect().left);"
        )
        assert lefts[0] < lefts[1]
        # A link to a flipped judgement opens it.
        chrome.get(path.as_uri() + f"#{ident}")
        chrome.wait_until(f"return document.getElementById('{ident}').open;")
